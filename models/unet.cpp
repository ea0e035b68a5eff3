/// `unet`: a small U-Net (Ronneberger et al. 2015) for CIFAR-sized images, the model whose
/// skip connections cross stage boundaries (core/model/block_io.h).
///
/// Blocks, for `depth` D and `channels` C (c_k = C * 2^(k-1)):
/// - "enc1" ... "encD": two 3x3 conv [-> batch norm] -> ReLU at c_k; the result is stashed
///   as the skip connection "skip<k>" and its 2x2 max-pool goes on as x;
/// - "bottom": the same two convs at 2 c_D, at 1/2^D of the input's sides;
/// - "decD" ... "dec1": a 2x2 stride-2 transposed conv up to c_k, concatenated with the
///   popped "skip<k>" (the original's crop is not needed: padded convs keep the sides), then
///   two convs back to c_k;
/// - "head": a 1x1 conv to per-pixel class scores, averaged over the pixels.
///
/// The original U-Net segments: its head's per-pixel scores are the segmentation. pipelab's
/// datasets carry one label per image, so the head averages the score map into one logit
/// vector per image (a fully convolutional classifier); the trunk and its skips are the
/// U-Net's. Padded convolutions (the original's are unpadded, with crops) keep every side
/// a multiple of 2^D, which the model checks. `batch_norm: false` drops the batch norms (and gives
/// the convs biases): micro-batches then train exactly as the whole mini-batch, which the
/// equivalence tests need.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

#include "core/config/bounds.h"
#include "models/blocks/containers.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

struct UnetOptions {
  int depth = 3;
  int64_t channels = 16;
  bool batch_norm = true;
  template <class V>
  void fields(V& v) {
    v("depth", depth, "down-sampling steps D (the image sides must be multiples of 2^D)", in_range(1, 30));
    v("channels", channels, "channels C of the first level (level k has C * 2^(k-1))", width_bound());
    v("batch_norm", batch_norm, "batch norm after every 3x3 conv (off: convs with biases)");
  }
};

/// Two 3x3 convs (padding 1), each [-> batch norm] -> ReLU.
Sequence double_conv(int64_t in, int64_t out, bool bn) {
  Sequence seq;
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i + 1);
    seq->add("conv" + n, torch::nn::Conv2d(torch::nn::Conv2dOptions(i == 0 ? in : out, out, 3).padding(1).bias(!bn)));
    if (bn) seq->add("bn" + n, torch::nn::BatchNorm2d(out));
    seq->add("relu" + n, torch::nn::ReLU());
  }
  return seq;
}

/// encK: {max-pool(h), h} with h = double_conv(x); h is the stashed skip connection.
class DownImpl : public torch::nn::Module {
 public:
  DownImpl(int64_t in, int64_t out, bool bn) : convs_(register_module("convs", double_conv(in, out, bn))) {}
  std::vector<torch::Tensor> forward(const torch::Tensor& x) {
    const torch::Tensor h = convs_->forward(x);
    return {torch::max_pool2d(h, 2), h};
  }

 private:
  Sequence convs_;
};
TORCH_MODULE(Down);

/// decK: double_conv(cat(up(x), skip)).
class UpImpl : public torch::nn::Module {
 public:
  UpImpl(int64_t in, int64_t out, bool bn)
      : up_(register_module("up", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(in, out, 2).stride(2)))),
        convs_(register_module("convs", double_conv(2 * out, out, bn))) {}
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip) {
    return convs_->forward(torch::cat({up_->forward(x), skip}, 1));
  }

 private:
  torch::nn::ConvTranspose2d up_;
  Sequence convs_;
};
TORCH_MODULE(Up);

/// 1x1 conv to class scores per pixel, averaged over the pixels.
class ScoreMapImpl : public torch::nn::Module {
 public:
  ScoreMapImpl(int64_t in, int64_t classes)
      : score_(register_module("score", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, classes, 1)))) {}
  torch::Tensor forward(const torch::Tensor& x) { return score_->forward(x).mean({2, 3}); }

 private:
  torch::nn::Conv2d score_;
};
TORCH_MODULE(ScoreMap);

class Unet : public Configured<ModelFactory, UnetOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    if (options_.channels > 4) m.widths["channels"] = 4;
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data);
    const int64_t step = int64_t{1} << options_.depth;
    if (image.height % step != 0 || image.width % step != 0) {
      fail("depth",
           fmt::format("{} down-sampling steps need image sides that are multiples of {}, got {}x{}", options_.depth,
                       step, image.height, image.width),
           "use a smaller depth (32x32 images take up to 5)");
    }
    const bool bn = options_.batch_norm;
    const int64_t classes = data.classes;
    ModelDef def;
    std::vector<int64_t> width{image.channels};  // width[k]: channels of level k (0: the image)
    for (int k = 1; k <= options_.depth; ++k) width.push_back(options_.channels << (k - 1));
    for (int k = 1; k <= options_.depth; ++k) {
      const int64_t in = width[static_cast<size_t>(k - 1)], out = width[static_cast<size_t>(k)];
      def.blocks.push_back({fmt::format("enc{}", k), [=] { return torch::nn::AnyModule(Down(in, out, bn)); },
                            stashes({fmt::format("skip{}", k)})});
    }
    const int64_t deepest = width.back(), bottom = 2 * deepest;
    def.blocks.push_back({"bottom", [=] { return torch::nn::AnyModule(double_conv(deepest, bottom, bn)); }});
    for (int k = options_.depth; k >= 1; --k) {
      const int64_t in = k == options_.depth ? bottom : width[static_cast<size_t>(k + 1)], out = width[static_cast<size_t>(k)];
      def.blocks.push_back({fmt::format("dec{}", k), [=] { return torch::nn::AnyModule(Up(in, out, bn)); },
                            pops({fmt::format("skip{}", k)})});
    }
    const int64_t first = width[1];
    def.blocks.push_back({"head", [=] { return torch::nn::AnyModule(ScoreMap(first, classes)); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Unet, "unet",
                 "a small U-Net whose skip connections cross stages (encoders stash, decoders pop); pooled score map");
}
