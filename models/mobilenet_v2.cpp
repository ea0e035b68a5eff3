/// `mobilenet_v2`: MobileNetV2 (Sandler et al. 2018) in torchvision's layout, which
/// gpipe_test fine-tunes (docs/schemes.md, "gpipe_test"), one block per entry of torchvision's
/// `features` so block i is features[i]: "features_0" (3x3/2 conv to 32 + bn + ReLU6),
/// "features_1" ... "features_17" (inverted residuals), "features_18" (1x1 conv to 1280 + bn
/// + ReLU6), then "head" (global average pool -> dropout -> fc).
///
/// An inverted residual is [1x1 expansion conv + bn + ReLU6 when t > 1] -> 3x3 depthwise conv
/// (stride s) + bn + ReLU6 -> 1x1 projection conv + bn, plus the input when s = 1 and the
/// width is unchanged. Stages (t, c, n, s): (1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,4,2)
/// (6,96,3,1) (6,160,3,2) (6,320,1,1). `width` scales every width as torchvision does
/// (rounded to multiples of 8, never below 90% of the scaled value; the last conv keeps 1280
/// unless width > 1).
///
/// Initialisation as torchvision: Kaiming-normal fan_out convs with zero biases, bn 1/0,
/// N(0, 0.01) linear with zero bias.
///
/// gpipe_test's splits (docs/schemes.md, "gpipe_test") put features[0] and the head on one client device around the
/// server stages: `partition: {stages: 5, balance: [1, 2, 4, 12, 1], placement: client_server}`
/// is its 4-GPU split, `{stages: 3, balance: [1, 18, 1], placement: client_server}` its 2-GPU
/// one (experiments/seeds/gpipe_test/).
#include <torch/nn/modules/linear.h>

#include <cmath>

#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

struct MobilenetV2Options {
  double width = 1.0;
  double dropout = 0.2;
  template <class V>
  void fields(V& v) {
    v("width", width, "width multiplier applied to every layer", in_open_low(0, 64));
    v("dropout", dropout, "dropout before the classifier", in_half_open(0, 1));
  }
};

/// torchvision's _make_divisible: the nearest multiple of 8, but not below 90% of `v`.
int64_t round_width(double v) {
  const int64_t divisor = 8;
  int64_t rounded = std::max(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

Sequence conv_bn_act(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups, Act act) {
  return conv_bn(ConvBnOptions(in, out, kernel).stride(stride).padding(kernel / 2).groups(groups).act(act));
}

torch::nn::AnyModule inverted_residual(int64_t in, int64_t out, int64_t stride, int64_t expansion) {
  const int64_t hidden = static_cast<int64_t>(std::round(static_cast<double>(in * expansion)));
  const bool residual = stride == 1 && in == out;
  Residual r(/*relu_after=*/false);
  Sequence plain;
  SequenceImpl& s = residual ? static_cast<SequenceImpl&>(*r) : *plain;
  if (expansion != 1) s.add("expand", conv_bn_act(in, hidden, 1, 1, 1, Act::Relu6));
  s.add("depthwise", conv_bn_act(hidden, hidden, 3, stride, hidden, Act::Relu6));
  s.add("project", conv_bn_act(hidden, out, 1, 1, 1, Act::None));
  auto init = [](torch::nn::Module& m) { init_convs_kaiming_fan_out(m); };
  return residual ? initialised(r, init) : initialised(plain, init);
}

class MobilenetV2 : public Configured<ModelFactory, MobilenetV2Options> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    if (options_.width > 0.25) m.widths["width"] = 0.25;
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data);
    const double w = options_.width, dropout = options_.dropout;
    const auto init = [](torch::nn::Module& m) {
      init_convs_kaiming_fan_out(m);
      init_linears_normal(m, 0.01);
    };
    ModelDef def;
    const int64_t channels = image.channels;
    int64_t in = round_width(32 * w);
    def.blocks.push_back({"features_0", [=] { return initialised(conv_bn_act(channels, in, 3, 2, 1, Act::Relu6), init); }});
    struct Stage {
      int64_t t, c, n, s;
    };
    const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                            {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    for (const Stage& st : stages) {
      const int64_t out = round_width(static_cast<double>(st.c) * w);
      for (int64_t i = 0; i < st.n; ++i) {
        const int64_t stride = i == 0 ? st.s : 1, t = st.t;
        def.blocks.push_back(
            {fmt::format("features_{}", def.blocks.size()), [=] { return inverted_residual(in, out, stride, t); }});
        in = out;
      }
    }
    const int64_t last = round_width(1280 * std::max(1.0, w)), classes = data.classes;
    def.blocks.push_back({fmt::format("features_{}", def.blocks.size()),
                          [=] { return initialised(conv_bn_act(in, last, 1, 1, 1, Act::Relu6), init); }});
    def.blocks.push_back({"head", [=] {
                            ClassifierOptions head;
                            head.dropout = dropout;
                            return initialised(classifier(last, classes, head), init);
                          }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    // torchvision.models.mobilenet_v2's names: features.i.conv's numbered layers are our
    // expand / depthwise / project (the first unit, t = 1, has no expand).
    def.published_names["torchvision"] = {
        {R"(features\.(\d+)\.0\.(.*))", R"(features_\1.conv.\2)"},
        {R"(features\.(\d+)\.1\.(.*))", R"(features_\1.bn.\2)"},
        {R"(features\.1\.conv\.0\.0\.(.*))", R"(features_1.depthwise.conv.\1)"},
        {R"(features\.1\.conv\.0\.1\.(.*))", R"(features_1.depthwise.bn.\1)"},
        {R"(features\.1\.conv\.1\.(.*))", R"(features_1.project.conv.\1)"},
        {R"(features\.1\.conv\.2\.(.*))", R"(features_1.project.bn.\1)"},
        {R"(features\.(\d+)\.conv\.0\.0\.(.*))", R"(features_\1.expand.conv.\2)"},
        {R"(features\.(\d+)\.conv\.0\.1\.(.*))", R"(features_\1.expand.bn.\2)"},
        {R"(features\.(\d+)\.conv\.1\.0\.(.*))", R"(features_\1.depthwise.conv.\2)"},
        {R"(features\.(\d+)\.conv\.1\.1\.(.*))", R"(features_\1.depthwise.bn.\2)"},
        {R"(features\.(\d+)\.conv\.2\.(.*))", R"(features_\1.project.conv.\2)"},
        {R"(features\.(\d+)\.conv\.3\.(.*))", R"(features_\1.project.bn.\2)"},
        {R"(classifier\.1\.(.*))", R"(head.fc.\1)"}};
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::MobilenetV2, "mobilenet_v2",
                 "MobileNetV2 (torchvision layout, width multiplier), one block per features[i]");
}
