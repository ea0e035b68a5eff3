/// `cnn`: a small convolutional classifier for 28x28 / 32x32 images. Blocks: one per conv
/// stage ("conv1", ...: 3x3 conv -> [batch norm] -> ReLU -> 2x2 max-pool), then "fc"
/// (flatten -> linear -> ReLU -> [dropout]) and "out" (linear to the classes).
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "core/config/bounds.h"
#include "core/model/model.h"
#include "core/nn/batch_norm.h"
#include "core/nn/dropout.h"

namespace pipelab::models {
namespace {

struct CnnOptions {
  std::vector<int64_t> channels{32, 64};
  int64_t hidden = 128;
  bool batch_norm = true;
  double dropout = 0;
  template <class V>
  void fields(V& v) {
    v("channels", channels, "output channels of each conv stage (each halves the resolution)", each(width_bound()));
    v("hidden", hidden, "width of the fully connected layer", width_bound());
    v("batch_norm", batch_norm, "batch norm after each convolution");
    v("dropout", dropout, "dropout before the output layer", in_half_open(0, 1));
  }
};

class ConvStageImpl : public torch::nn::Module {
 public:
  ConvStageImpl(int64_t in, int64_t out, bool batch_norm) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1).bias(!batch_norm)));
    if (batch_norm) bn_ = register_module("bn", nn::BatchNorm(out));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = conv_(x);
    if (bn_) x = bn_(x);
    return torch::max_pool2d(torch::relu(x), 2);
  }

 private:
  torch::nn::Conv2d conv_{nullptr};
  nn::BatchNorm bn_{nullptr};
};
TORCH_MODULE(ConvStage);

class HiddenImpl : public torch::nn::Module {
 public:
  HiddenImpl(int64_t in, int64_t out, double dropout) {
    linear_ = register_module("linear", torch::nn::Linear(in, out));
    if (dropout > 0) dropout_ = register_module("dropout", nn::Dropout(dropout));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(linear_(x.flatten(1)));
    return dropout_ ? dropout_(x) : x;
  }

 private:
  torch::nn::Linear linear_{nullptr};
  nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Hidden);

class Cnn : public Configured<ModelFactory, CnnOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    std::vector<int64_t> channels = options_.channels;
    for (int64_t& c : channels) c = std::min<int64_t>(c, 8);
    if (channels != options_.channels) m.widths["channels"] = YAML::Node(channels);
    if (options_.hidden > 32) m.widths["hidden"] = 32;
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    if (data.input_shape.size() != 3) {
      fail("", fmt::format("needs image data [channels, height, width], but examples have shape {}",
                           shape_text(data.input_shape)),
           "use an image dataset (e.g. synthetic with shape: [1, 28, 28]) or model type mlp");
    }
    int64_t c = data.input_shape[0], h = data.input_shape[1], w = data.input_shape[2];
    ModelDef def;
    const bool bn = options_.batch_norm;
    for (size_t i = 0; i < options_.channels.size(); ++i) {
      const int64_t in = c, out = options_.channels[i];
      if (h < 2 || w < 2) {
        fail("channels", fmt::format("{} conv stages shrink {}x{} images below 1x1", options_.channels.size(),
                                     data.input_shape[1], data.input_shape[2]),
             "use fewer conv stages");
      }
      def.blocks.push_back({fmt::format("conv{}", i + 1), [=] { return torch::nn::AnyModule(ConvStage(in, out, bn)); }});
      c = out;
      h /= 2;
      w /= 2;
    }
    const int64_t flat = c * h * w, hidden = options_.hidden, classes = data.classes;
    const double dropout = options_.dropout;
    def.blocks.push_back({"fc", [=] { return torch::nn::AnyModule(Hidden(flat, hidden, dropout)); }});
    def.blocks.push_back({"out", [=] { return torch::nn::AnyModule(torch::nn::Linear(hidden, classes)); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Cnn, "cnn", "small CNN: conv stages, a hidden layer, a classifier");
}
