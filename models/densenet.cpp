/// `densenet121`: DenseNet-BC (Huang et al. 2017) with one block per dense layer, so a
/// partition can cut between any two layers: "stem", "dense1_1" ... "dense1_6", "trans1",
/// ..., "dense4_16", "head". A dense layer is bn -> ReLU -> 1x1 conv (to bn_size x growth)
/// -> bn -> ReLU -> 3x3 conv (to growth), concatenated after its input; a transition is
/// bn -> ReLU -> 1x1 conv (to floor(reduction x channels)) -> 2x2 average pool; the head is
/// bn -> ReLU -> global average pool -> fc.
///
/// - `stem: cifar` (default) is the CIFAR variant SpecTrain trains (`models/densenet`,
///   docs/schemes.md, "SpecTrain: models and module-to-stage maps"): a bare 3x3 conv to 2 x growth channels.
/// - `stem: imagenet` is torchvision's layout: 7x7/2 conv + bn + ReLU + 3x3/2 max-pool.
///
/// New features are concatenated after the input ([x, new]) as torchvision does; SpecTrain's
/// CIFAR code puts them first, a channel permutation that changes nothing but the order of
/// the transition weights' input channels.
///
/// Initialisation as SpecTrain's stages: Kaiming-normal fan_out convs, bn 1/0, N(0, 0.01)
/// linear with zero bias (torchvision's ImageNet model uses fan_in; we keep one rule).
///
/// Named splits: SpecTrain's four modules are dense block + transition x 3, then dense
/// block 4 + head; the stem goes with module 0. Maps [0,1,1,1,1] and [0,1,2,3,3] (docs/schemes.md, "SpecTrain: models
/// and module-to-stage maps") give `spectrain_2` = [8, 55] and `spectrain_4` = [8, 13, 25, 17] for (6, 12, 24, 16).
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>
#include <numeric>

#include "core/config/bounds.h"
#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

enum class DenseStem { Cifar, Imagenet };

struct DensenetOptions {
  int64_t growth = 32;
  std::vector<int> blocks{6, 12, 24, 16};
  double reduction = 0.5;
  int64_t bn_size = 4;
  DenseStem stem = DenseStem::Cifar;
  template <class V>
  void fields(V& v) {
    v("growth", growth, "growth rate k: channels each dense layer adds", width_bound());
    v("blocks", blocks, "dense layers per dense block (121: [6, 12, 24, 16])", each(repeats_bound()));
    v("reduction", reduction, "share of channels a transition keeps", in_range(0, 1));
    v("bn_size", bn_size, "bottleneck width of a dense layer, in multiples of growth", width_bound());
    v.choice("stem", stem, Choices<DenseStem>{{"cifar", DenseStem::Cifar}, {"imagenet", DenseStem::Imagenet}},
             "cifar: a 3x3 conv; imagenet: 7x7/2 conv, bn, ReLU and 3x3/2 max-pool");
  }
  void check(const ConfigNode& node) const {
    if (reduction <= 0) node.child("reduction").fail("must be > 0", "use e.g. 0.5");
  }
};

/// bn -> ReLU -> conv.
Sequence pre_activation_conv(int64_t in, int64_t out, int64_t kernel) {
  return conv_bn(ConvBnOptions(in, out, kernel).padding(kernel / 2).order(Order::BnActConv));
}

/// One dense layer: the input, followed by `growth` new channels computed from it.
Branches dense_layer(int64_t in, int64_t width, int64_t growth) {
  Sequence fresh;
  fresh->add("conv1", pre_activation_conv(in, width, 1)).add("conv2", pre_activation_conv(width, growth, 3));
  Branches layer;
  layer->add("input", torch::nn::Identity()).add("new", fresh);
  return layer;
}

class Densenet : public Configured<ModelFactory, DensenetOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    if (options_.growth > 8) m.widths["growth"] = 8;
    if (options_.bn_size > 2) m.widths["bn_size"] = 2;
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    const bool cifar = options_.stem == DenseStem::Cifar;
    const int transitions = static_cast<int>(options_.blocks.size()) - 1;
    const int64_t min_side = (cifar ? 1 : 4) << transitions;
    const ImageShape image = image_input(*this, data, min_side, fmt::format("{} 2x2 transition pools", transitions));
    const int64_t growth = options_.growth, width = options_.bn_size * growth, in_channels = image.channels;
    ModelDef def;
    int64_t c = 2 * growth;
    if (cifar) {
      def.blocks.push_back({"stem", [=] {
                              return initialised(
                                  conv_bn(ConvBnOptions(in_channels, c, 3).padding(1).batch_norm(false).act(Act::None)),
                                  init_spectrain);
                            }});
    } else {
      def.blocks.push_back({"stem", [=] { return initialised(imagenet_stem(in_channels, c), init_spectrain); }});
    }
    std::vector<int> module_blocks;  // blocks per SpecTrain module
    for (size_t b = 0; b < options_.blocks.size(); ++b) {
      for (int j = 0; j < options_.blocks[b]; ++j) {
        def.blocks.push_back({fmt::format("dense{}_{}", b + 1, j + 1),
                              [=] { return initialised(dense_layer(c, width, growth), init_spectrain); }});
        c += growth;
      }
      module_blocks.push_back(options_.blocks[b] + 1);  // + transition, or + head for the last
      if (static_cast<int>(b) < transitions) {
        const int64_t out = static_cast<int64_t>(std::floor(static_cast<double>(c) * options_.reduction));
        if (out < 1) {
          fail("reduction", fmt::format("a transition would keep no channels of {}", c), "use a larger reduction");
        }
        def.blocks.push_back({fmt::format("trans{}", b + 1), [=] {
                                Sequence t = pre_activation_conv(c, out, 1);
                                t->add("pool", torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(2).stride(2)));
                                return initialised(t, init_spectrain);
                              }});
        c = out;
      }
    }
    const int64_t classes = data.classes;
    def.blocks.push_back({"head", [=] {
                            ClassifierOptions head;
                            head.bn_relu = true;
                            return initialised(classifier(c, classes, head), init_spectrain);
                          }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    // torchvision's names (the ImageNet stem is its layout). Its published densenet121
    // checkpoint predates the current names ("denselayer1.norm.1" for "norm1"); torchvision
    // rewrites them on loading, and so do the second pair of rules here.
    if (!cifar) {
      def.published_names["torchvision"] = {
          {R"(features\.conv0\.(.*))", R"(stem.conv.\1)"},
          {R"(features\.norm0\.(.*))", R"(stem.bn.\1)"},
          {R"(features\.denseblock(\d)\.denselayer(\d+)\.norm\.?(\d)\.(.*))", R"(dense\1_\2.new.conv\3.bn.\4)"},
          {R"(features\.denseblock(\d)\.denselayer(\d+)\.conv\.?(\d)\.(.*))", R"(dense\1_\2.new.conv\3.conv.\4)"},
          {R"(features\.transition(\d)\.norm\.(.*))", R"(trans\1.bn.\2)"},
          {R"(features\.transition(\d)\.conv\.(.*))", R"(trans\1.conv.\2)"},
          {R"(features\.norm5\.(.*))", R"(head.bn.\1)"},
          {R"(classifier\.(.*))", R"(head.fc.\1)"}};
    }
    module_blocks.front() += 1;  // the stem
    if (module_blocks.size() == 4) {
      const int rest = std::accumulate(module_blocks.begin() + 1, module_blocks.end(), 0);
      def.named_balances = {{"spectrain_2", {module_blocks[0], rest}}, {"spectrain_4", module_blocks}};
    }
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Densenet, "densenet121",
                 "DenseNet-121 (CIFAR or ImageNet stem), one block per dense layer or transition");
}
