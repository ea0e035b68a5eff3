/// `resnet`: ResNets (He et al. 2016) with one block per residual unit, so a partition can cut
/// between any two units: "stem", "layer1_0" ... "layer4_2" (torchvision's layerI.J), "head"
/// (global average pool -> fc). Units are basic (two 3x3 convs) or bottleneck (1x1 -> 3x3 ->
/// 1x1 with 4x expansion, stride on the 3x3 as torchvision's v1.5); a projection shortcut
/// (1x1 conv + bn) wherever the shape changes.
///
/// - `depth` picks torchvision's layouts: 18/34 basic, 50/101/152 bottleneck.
/// - `architecture: "64,3/128,4/256,6/512,3"` gives width,count per stage instead, as the
///   interlocking-backprop example does (docs/schemes.md, "Interlocking ResNet example": basic units, a ResNet-34
///   layout).
/// - `stem: cifar` is a 3x3 conv + bn + ReLU without max-pool (interlocking, docs/schemes.md, "Interlocking ResNet
/// example");
///   `stem: imagenet` the 7x7/2 conv + max-pool, which SpecTrain's ResNet-50 applies to 32x32
///   images too (docs/schemes.md, "SpecTrain: models and module-to-stage maps" and docs/schemes.md, "Quirks") and
///   torchgpipe to 224x224 ones (docs/schemes.md, "torchgpipe benchmarks").
///
/// Initialisation as torchvision and the references (SpecTrain's stages, docs/schemes.md, "Interlocking ResNet
/// example"): Kaiming-normal fan_out convs, batch norm 1/0, the fc layer left at LibTorch's (= PyTorch's) default.
///
/// Named splits (block counts; a ResNet has 1 + units + 1 blocks):
/// - ResNet-50, `spectrain_2` = [15, 3] and `spectrain_4` = [14, 1, 1, 2]. SpecTrain uses
///   PipeDream's generated `resnet50/gpus=2` modules (docs/schemes.md, "SpecTrain: models and module-to-stage maps"),
///   which cut inside bottlenecks: module 0 ends after the 3x3 conv of layer3's last unit, module 1 after the 3x3 conv
///   of layer4_0, module 2 after the second bn of layer4_1, module 3 holds the rest and the fc.
///   Each cut moves to the end of the unit it falls in (each module keeps the unit whose
///   3x3 conv it holds): stem..layer3_5 | layer4_0 | layer4_1 | layer4_2 + head. The 4-stage
///   map [0,1,2,3,3] is one module per stage; the 2-stage map [0,0,1,1,1] is modules 0-1 | 2-3.
/// - ResNet-101, `pipeoptim_4` = [4, 7, 10, 14]: PipeOptim's stem+layer1 | layer2 + 3 units
///   of layer3 | 10 units | 10 units + layer4 + fc (docs/schemes.md, "PipeOptim scripts"), exactly.
/// - ResNet-101, torchgpipe's benchmark balances (docs/schemes.md, "torchgpipe benchmarks") count layers of a flattened
///   370-layer Sequential: a 4-layer stem, 11 layers per bottleneck (the last a ReLU after the
///   residual add), avgpool/flatten/fc. pipeline-8 [26, 22, 33, 44, 44, 66, 66, 69] cuts only
///   between bottlenecks: `torchgpipe_8` = [3, 2, 3, 4, 4, 6, 6, 7], exactly. pipeline-2
///   [135, 235] cuts before the final ReLU of the 12th bottleneck: `torchgpipe_2` = [13, 22]
///   keeps that parameter-free ReLU on the first stage. pipeline-4 [44, 92, 124, 110] and
///   the accuracy runs' [140, 230] cut inside bottlenecks (after layers 7, 3 and 4 of one)
///   and have no block equivalent, so they are not offered.
#include <torch/nn/modules/linear.h>

#include <set>
#include <sstream>

#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

enum class UnitKind { Auto, Basic, Bottleneck };
enum class Stem { Cifar, Imagenet };

/// One stage of the network: `count` units of width `width`.
struct StageSpec {
  int64_t width = 0;
  int count = 0;
  bool operator==(const StageSpec& o) const { return width == o.width && count == o.count; }
};

/// Parses "64,3/128,4/..." into stages; an error (its text) when malformed.
std::vector<StageSpec> parse_architecture(const std::string& text, std::string& error) {
  std::vector<StageSpec> stages;
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, '/')) {
    StageSpec s;
    char comma = 0;
    std::stringstream one(item);
    if (!(one >> s.width >> comma >> s.count) || comma != ',' || !(one >> std::ws).eof() || s.width < 1 ||
        s.count < 1) {
      error = fmt::format("'{}' is not 'width,count' with positive integers", item);
      return {};
    }
    stages.push_back(s);
  }
  if (stages.empty()) error = "no stages";
  return stages;
}

struct ResnetOptions {
  int depth = 18;
  std::string architecture;
  UnitKind unit = UnitKind::Auto;
  Stem stem = Stem::Cifar;
  template <class V>
  void fields(V& v) {
    v("depth", depth, "18, 34 (basic units), 50, 101 or 152 (bottleneck units); ignored with architecture");
    v("architecture", architecture,
      "stages as width,count separated by '/' (e.g. \"64,3/128,4/256,6/512,3\"); empty: from depth");
    v.choice(
        "unit", unit,
        Choices<UnitKind>{{"auto", UnitKind::Auto}, {"basic", UnitKind::Basic}, {"bottleneck", UnitKind::Bottleneck}},
        "residual unit; auto: as torchvision for depth, basic with architecture");
    v.choice("stem", stem, Choices<Stem>{{"cifar", Stem::Cifar}, {"imagenet", Stem::Imagenet}},
             "cifar: 3x3 conv, no max-pool; imagenet: 7x7/2 conv and 3x3/2 max-pool");
  }
  void check(const ConfigNode& node) const {
    if (!architecture.empty()) {
      // depth keeps its default in a resolved config.yaml; any other value conflicts.
      if (node.has("depth") && depth != 18) {
        node.child("depth").fail("depth and architecture both set", "remove one of them");
      }
      std::string error;
      parse_architecture(architecture, error);
      if (!error.empty()) {
        node.child("architecture").fail(error, "write stages as width,count separated by '/', e.g. \"64,3/128,4\"");
      }
    } else if (!std::set<int>{18, 34, 50, 101, 152}.count(depth)) {
      node.child("depth").fail(fmt::format("no standard ResNet has depth {}", depth),
                               "use 18, 34, 50, 101 or 152, or give an architecture");
    }
  }
  /// The stages and whether units are bottlenecks.
  std::vector<StageSpec> layout(bool& bottleneck) const {
    std::string error;
    if (!architecture.empty()) {
      bottleneck = unit == UnitKind::Bottleneck;
      return parse_architecture(architecture, error);
    }
    bottleneck = unit == UnitKind::Auto ? depth >= 50 : unit == UnitKind::Bottleneck;
    const std::vector<int> counts = depth == 18    ? std::vector<int>{2, 2, 2, 2}
                                    : depth == 34  ? std::vector<int>{3, 4, 6, 3}
                                    : depth == 50  ? std::vector<int>{3, 4, 6, 3}
                                    : depth == 101 ? std::vector<int>{3, 4, 23, 3}
                                                   : std::vector<int>{3, 8, 36, 3};
    return {{64, counts[0]}, {128, counts[1]}, {256, counts[2]}, {512, counts[3]}};
  }
};

/// conv -> bn (-> ReLU when `relu`).
Sequence conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool relu) {
  return conv_bn(ConvBnOptions(in, out, kernel).stride(stride).padding(kernel / 2).act(relu ? Act::Relu : Act::None));
}

/// One residual unit: basic (3x3, 3x3) or bottleneck (1x1, 3x3 with the stride, 1x1 to 4x).
Residual unit(int64_t in, int64_t width, int64_t stride, bool bottleneck) {
  Residual r(/*relu_after=*/true);
  const int64_t out = bottleneck ? 4 * width : width;
  if (bottleneck) {
    r->add("conv1", conv(in, width, 1, 1, true));
    r->add("conv2", conv(width, width, 3, stride, true));
    r->add("conv3", conv(width, out, 1, 1, false));
  } else {
    r->add("conv1", conv(in, width, 3, stride, true));
    r->add("conv2", conv(width, width, 3, 1, false));
  }
  if (stride != 1 || in != out) r->shortcut(conv(in, out, 1, stride, false));
  return r;
}

class Resnet : public Configured<ModelFactory, ResnetOptions> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data);
    bool bottleneck = false;
    const std::vector<StageSpec> stages = options_.layout(bottleneck);
    ModelDef def;
    const int64_t channels = image.channels, stem_width = stages.front().width;
    if (options_.stem == Stem::Imagenet) {
      def.blocks.push_back(
          {"stem", [=] { return initialised(imagenet_stem(channels, stem_width), init_convs_kaiming_fan_out); }});
    } else {
      def.blocks.push_back(
          {"stem", [=] { return initialised(conv(channels, stem_width, 3, 1, true), init_convs_kaiming_fan_out); }});
    }
    int64_t in = stem_width;
    for (size_t s = 0; s < stages.size(); ++s) {
      for (int j = 0; j < stages[s].count; ++j) {
        const int64_t width = stages[s].width, stride = (s > 0 && j == 0) ? 2 : 1;
        def.blocks.push_back({fmt::format("layer{}_{}", s + 1, j), [=] {
                                return initialised(unit(in, width, stride, bottleneck), init_convs_kaiming_fan_out);
                              }});
        in = bottleneck ? 4 * width : width;
      }
    }
    const int64_t classes = data.classes;
    def.blocks.push_back({"head", [=] { return initialised(classifier(in, classes), init_convs_kaiming_fan_out); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    // torchvision.models.resnet*'s names (the same layout with the ImageNet stem; a unit's
    // bnK follows its convK, its downsample is our shortcut).
    def.published_names["torchvision"] = {
        {R"(conv1\.(.*))", R"(stem.conv.\1)"},
        {R"(bn1\.(.*))", R"(stem.bn.\1)"},
        {R"(layer(\d)\.(\d+)\.conv(\d)\.(.*))", R"(layer\1_\2.conv\3.conv.\4)"},
        {R"(layer(\d)\.(\d+)\.bn(\d)\.(.*))", R"(layer\1_\2.conv\3.bn.\4)"},
        {R"(layer(\d)\.(\d+)\.downsample\.0\.(.*))", R"(layer\1_\2.shortcut.conv.\3)"},
        {R"(layer(\d)\.(\d+)\.downsample\.1\.(.*))", R"(layer\1_\2.shortcut.bn.\3)"},
        {R"(fc\.(.*))", R"(head.fc.\1)"}};

    // True for torchvision's bottleneck layout with these unit counts (widths 64, 128, ...).
    auto bottlenecks = [&](std::vector<int> counts) {
      if (!bottleneck || stages.size() != counts.size()) return false;
      for (size_t i = 0; i < counts.size(); ++i) {
        if (!(stages[i] == StageSpec{int64_t{64} << i, counts[i]})) return false;
      }
      return true;
    };
    if (bottlenecks({3, 4, 6, 3})) def.named_balances = {{"spectrain_2", {15, 3}}, {"spectrain_4", {14, 1, 1, 2}}};
    if (bottlenecks({3, 4, 23, 3})) {
      def.named_balances = {
          {"pipeoptim_4", {4, 7, 10, 14}}, {"torchgpipe_2", {13, 22}}, {"torchgpipe_8", {3, 2, 3, 4, 4, 6, 6, 7}}};
    }
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Resnet, "resnet",
                 "ResNet (depth 18-152 or width,count stages), one block per residual unit");
}
