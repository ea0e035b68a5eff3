/// `vgg16`: VGG-16 (Simonyan & Zisserman 2015) as the SpecTrain experiments use it, one block
/// per layer with weights: "conv1" ... "conv13" (3x3 conv -> [bn] -> ReLU, with the 2x2
/// max-pool that follows conv 2, 4, 7, 10 and 13 appended to that conv's block), then "fc1",
/// "fc2" (linear -> ReLU -> dropout) and "fc3" (linear to the classes).
///
/// - `variant: spectrain` is SpecTrain's `models/vgg16/gpus=16_straight` (docs/schemes.md
///   docs/schemes.md, "SpecTrain: models and module-to-stage maps"): no batch norm, conv biases, then adaptive average
///   pooling to 7x7 of the 1x1 map that 32x32 inputs leave, and torchvision's ImageNet classifier 25088 -> 4096 -> 4096
///   -> classes (a model quirk, docs/schemes.md, "Quirks", kept because the published table used it).
/// - `variant: cifar` is the usual CIFAR VGG-16: batch norm after every conv and a 512-wide
///   classifier 512 -> 512 -> 512 -> classes, after global average pooling (the identity on
///   the 1x1 map of 32x32 inputs).
///
/// Initialisation as SpecTrain's `_initialize_weights`: Kaiming-normal fan_out convs, N(0,
/// 0.01) linears, zero biases.
///
/// Named splits. SpecTrain's 16 "modules" are its stages stage0 ... stage15: stage i < 13 is
/// conv i+1 with its ReLU (and the max-pool after it; stage12 also the 7x7 pooling and the
/// flatten), stage13 and stage14 the hidden linear layers with ReLU and dropout, stage15 the
/// output layer. They are exactly our 16 blocks, so the module-to-stage maps of docs/schemes.md, "SpecTrain: models and
/// module-to-stage maps" become block counts directly: modules 0-3 | 4-15 -> spectrain_2 = [4, 12]; 0-1 | 2-4 | 5-9 |
/// 10-15 -> spectrain_4 = [2, 3, 5, 6]. Both variants have the same blocks and splits.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "core/nn/dropout.h"
#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

enum class VggVariant { Spectrain, Cifar };

struct VggOptions {
  VggVariant variant = VggVariant::Spectrain;
  double dropout = 0.5;
  template <class V>
  void fields(V& v) {
    v.choice("variant", variant,
             Choices<VggVariant>{{"spectrain", VggVariant::Spectrain}, {"cifar", VggVariant::Cifar}},
             "spectrain: no batch norm, 7x7 pooling and the 25088-4096-4096 classifier (SpecTrain); "
             "cifar: batch norm and a 512-512-512 classifier");
    v("dropout", dropout, "dropout after each hidden linear layer", in_half_open(0, 1));
  }
};

/// Output channels of the 13 convs; true where a 2x2 max-pool follows.
constexpr int64_t kWidths[13] = {64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512};
constexpr bool kPoolAfter[13] = {false, true, false, true, false, false, true, false, false, true, false, false, true};

Sequence linear_block(int64_t in, int64_t out, bool hidden, double dropout) {
  Sequence s;
  s->add("linear", torch::nn::Linear(in, out));
  if (hidden) {
    s->add("relu", torch::nn::ReLU());
    if (dropout > 0) s->add("dropout", nn::Dropout(dropout));
  }
  return s;
}

class Vgg16 : public Configured<ModelFactory, VggOptions> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data, 32, "five 2x2 max-pools");
    const bool spectrain = options_.variant == VggVariant::Spectrain;
    const double dropout = options_.dropout;
    ModelDef def;
    int64_t in = image.channels;
    for (int i = 0; i < 13; ++i) {
      const int64_t out = kWidths[i];
      const bool pool = kPoolAfter[i], last = i == 12;
      def.blocks.push_back({fmt::format("conv{}", i + 1), [=] {
                              Sequence s =
                                  conv_bn(ConvBnOptions(in, out, 3).padding(1).bias(true).batch_norm(!spectrain));
                              if (pool) s->add("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)));
                              if (last) {
                                s->add("avgpool", torch::nn::AdaptiveAvgPool2d(spectrain ? 7 : 1));
                                s->add("flatten", torch::nn::Flatten());
                              }
                              return initialised(s, init_spectrain);
                            }});
      in = out;
    }
    const int64_t flat = spectrain ? 512 * 7 * 7 : 512, hidden = spectrain ? 4096 : 512, classes = data.classes;
    def.blocks.push_back(
        {"fc1", [=] { return initialised(linear_block(flat, hidden, true, dropout), init_spectrain); }});
    def.blocks.push_back(
        {"fc2", [=] { return initialised(linear_block(hidden, hidden, true, dropout), init_spectrain); }});
    def.blocks.push_back({"fc3", [=] { return initialised(linear_block(hidden, classes, false, 0), init_spectrain); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    def.named_balances = {{"spectrain_2", {4, 12}}, {"spectrain_4", {2, 3, 5, 6}}};
    if (spectrain) {
      // torchvision.models.vgg16's names (the spectrain variant is its layout): features.k is
      // the k-th layer of its one Sequential (convs, ReLUs and pools), classifier.0/3/6 the
      // linears.
      std::vector<NameRule>& rules = def.published_names["torchvision"];
      int layer = 0;
      for (int i = 0; i < 13; ++i) {
        rules.push_back({fmt::format(R"(features\.{}\.(.*))", layer), fmt::format(R"(conv{}.conv.\1)", i + 1)});
        layer += kPoolAfter[i] ? 3 : 2;  // conv, ReLU (, pool)
      }
      for (int i = 0; i < 3; ++i) {
        rules.push_back({fmt::format(R"(classifier\.{}\.(.*))", 3 * i), fmt::format(R"(fc{}.linear.\1)", i + 1)});
      }
    }
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Vgg16, "vgg16",
                 "VGG-16, one block per conv or linear layer (SpecTrain's 16 modules)");
}
