/// `inception_v3`: Inception-v3 (Szegedy et al. 2016) in torchvision's layout without the
/// auxiliary logits, as PipeOptim trains it (docs/schemes.md, "PipeOptim scripts"). One block per stem
/// conv and per mixed module, named as torchvision's attributes: "Conv2d_1a_3x3",
/// "Conv2d_2a_3x3", "Conv2d_2b_3x3" (+ 3x3/2 max-pool), "Conv2d_3b_1x1", "Conv2d_4a_3x3"
/// (+ max-pool), "Mixed_5b" ... "Mixed_7c", then "head" (global average pool -> dropout
/// -> fc). Every conv is BasicConv2d: conv without bias -> bn (eps 1e-3) -> ReLU.
///
/// Initialisation as PipeOptim's stages: conv and linear weights from N(0, 0.1) truncated at
/// +-2 std (scipy's truncnorm(-2, 2, scale=0.1)); bn 1/0; the fc bias keeps the default.
///
/// Inputs must be at least 75x75 (299x299 in the reference): smaller images vanish in the
/// unpadded stride-2 convs.
///
/// Named split: PipeOptim's stem | 5b-6a | 6b-6d | 6e-7c + fc (docs/schemes.md, "PipeOptim scripts") is `pipeoptim_4` =
/// [5, 4, 3, 5].
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

struct InceptionV3Options {
  double dropout = 0.5;
  template <class V>
  void fields(V& v) {
    v("dropout", dropout, "dropout before the classifier", in_half_open(0, 1));
  }
};

/// BasicConv2d: conv (no bias) -> bn (eps 1e-3) -> ReLU.
Sequence basic(int64_t in, int64_t out, torch::ExpandingArray<2> kernel, torch::ExpandingArray<2> padding = 0,
               int64_t stride = 1) {
  return conv_bn(ConvBnOptions(in, out, kernel).padding(padding).stride(stride).eps(1e-3));
}

/// Convs applied one after another, named prefix_1, prefix_2, ... as in torchvision.
Sequence chain(const std::string& prefix, std::vector<Sequence> convs) {
  Sequence s;
  for (size_t i = 0; i < convs.size(); ++i) s->add(fmt::format("{}_{}", prefix, i + 1), convs[i]);
  return s;
}

torch::nn::AvgPool2d avg3() { return torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(3).stride(1).padding(1)); }
torch::nn::MaxPool2d max3() { return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2)); }

/// avg-pool 3x3/1 -> 1x1 conv (the pool branch of A, C and E).
Sequence pool_branch(int64_t in, int64_t out) {
  Sequence s;
  s->add("pool", avg3()).add("conv", basic(in, out, 1));
  return s;
}

Branches mixed_a(int64_t in, int64_t pool_features) {
  Branches b;
  b->add("branch1x1", basic(in, 64, 1));
  b->add("branch5x5", chain("conv", {basic(in, 48, 1), basic(48, 64, 5, 2)}));
  b->add("branch3x3dbl", chain("conv", {basic(in, 64, 1), basic(64, 96, 3, 1), basic(96, 96, 3, 1)}));
  b->add("branch_pool", pool_branch(in, pool_features));
  return b;
}

Branches mixed_b(int64_t in) {
  Branches b;
  b->add("branch3x3", basic(in, 384, 3, 0, 2));
  b->add("branch3x3dbl", chain("conv", {basic(in, 64, 1), basic(64, 96, 3, 1), basic(96, 96, 3, 0, 2)}));
  b->add("branch_pool", max3());
  return b;
}

Branches mixed_c(int64_t in, int64_t c7) {
  const std::vector<int64_t> k17{1, 7}, k71{7, 1}, p03{0, 3}, p30{3, 0};
  Branches b;
  b->add("branch1x1", basic(in, 192, 1));
  b->add("branch7x7", chain("conv", {basic(in, c7, 1), basic(c7, c7, k17, p03), basic(c7, 192, k71, p30)}));
  b->add("branch7x7dbl", chain("conv", {basic(in, c7, 1), basic(c7, c7, k71, p30), basic(c7, c7, k17, p03),
                                        basic(c7, c7, k71, p30), basic(c7, 192, k17, p03)}));
  b->add("branch_pool", pool_branch(in, 192));
  return b;
}

Branches mixed_d(int64_t in) {
  const std::vector<int64_t> k17{1, 7}, k71{7, 1}, p03{0, 3}, p30{3, 0};
  Branches b;
  b->add("branch3x3", chain("conv", {basic(in, 192, 1), basic(192, 320, 3, 0, 2)}));
  b->add("branch7x7x3", chain("conv", {basic(in, 192, 1), basic(192, 192, k17, p03), basic(192, 192, k71, p30),
                                       basic(192, 192, 3, 0, 2)}));
  b->add("branch_pool", max3());
  return b;
}

/// 1x3 and 3x1 convs side by side on the same input (Inception-E's widened branches).
Branches split_1x3_3x1(int64_t c) {
  const std::vector<int64_t> k13{1, 3}, k31{3, 1}, p01{0, 1}, p10{1, 0};
  Branches b;
  b->add("conv_1x3", basic(c, c, k13, p01));
  b->add("conv_3x1", basic(c, c, k31, p10));
  return b;
}

Branches mixed_e(int64_t in) {
  Branches b;
  b->add("branch1x1", basic(in, 320, 1));
  Sequence b3;
  b3->add("conv_1", basic(in, 384, 1)).add("split", split_1x3_3x1(384));
  b->add("branch3x3", b3);
  Sequence dbl;
  dbl->add("conv_1", basic(in, 448, 1)).add("conv_2", basic(448, 384, 3, 1)).add("split", split_1x3_3x1(384));
  b->add("branch3x3dbl", dbl);
  b->add("branch_pool", pool_branch(in, 192));
  return b;
}

void init(torch::nn::Module& m) { init_truncated_normal(m, 0.1); }

class InceptionV3 : public Configured<ModelFactory, InceptionV3Options> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data, 75, "unpadded stride-2 convs and pools");
    const int64_t c = image.channels, classes = data.classes;
    const double dropout = options_.dropout;
    ModelDef def;
    auto add = [&](const std::string& name, auto make) {
      def.blocks.push_back({name, [make] { return initialised(make(), init); }});
    };
    add("Conv2d_1a_3x3", [=] { return basic(c, 32, 3, 0, 2); });
    add("Conv2d_2a_3x3", [] { return basic(32, 32, 3); });
    add("Conv2d_2b_3x3", [] {
      Sequence s = basic(32, 64, 3, 1);
      s->add("pool", max3());
      return s;
    });
    add("Conv2d_3b_1x1", [] { return basic(64, 80, 1); });
    add("Conv2d_4a_3x3", [] {
      Sequence s = basic(80, 192, 3);
      s->add("pool", max3());
      return s;
    });
    add("Mixed_5b", [] { return mixed_a(192, 32); });
    add("Mixed_5c", [] { return mixed_a(256, 64); });
    add("Mixed_5d", [] { return mixed_a(288, 64); });
    add("Mixed_6a", [] { return mixed_b(288); });
    add("Mixed_6b", [] { return mixed_c(768, 128); });
    add("Mixed_6c", [] { return mixed_c(768, 160); });
    add("Mixed_6d", [] { return mixed_c(768, 160); });
    add("Mixed_6e", [] { return mixed_c(768, 192); });
    add("Mixed_7a", [] { return mixed_d(768); });
    add("Mixed_7b", [] { return mixed_e(1280); });
    add("Mixed_7c", [] { return mixed_e(2048); });
    add("head", [=] {
      ClassifierOptions head;
      head.dropout = dropout;
      return classifier(2048, classes, head);
    });
    def.loss = std::make_shared<CrossEntropyLoss>();
    def.named_balances = {{"pipeoptim_4", {5, 4, 3, 5}}};
    // torchvision.models.inception_v3's names: its flat branch convs (branch5x5_1) are our
    // branch sequences' convs (branch5x5.conv_1), its 7b/7c 1x3 and 3x1 pairs (_2a, _2b;
    // _3a, _3b) our splits, and its auxiliary classifier, which we do not build, is dropped.
    def.published_names["torchvision"] = {
        {R"(AuxLogits\..*)", ""},
        {R"((Mixed_7[bc])\.(branch3x3(?:dbl)?)_\d+a\.(.*))", R"(\1.\2.split.conv_1x3.\3)"},
        {R"((Mixed_7[bc])\.(branch3x3(?:dbl)?)_\d+b\.(.*))", R"(\1.\2.split.conv_3x1.\3)"},
        {R"((Mixed_\w+)\.(branch\w+?)_(\d)\.(.*))", R"(\1.\2.conv_\3.\4)"},
        {R"((Mixed_\w+)\.branch_pool\.(.*))", R"(\1.branch_pool.conv.\2)"},
        {R"(fc\.(.*))", R"(head.fc.\1)"}};
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::InceptionV3, "inception_v3",
                 "Inception-v3 without aux logits (torchvision layout), one block per stem conv or mixed module");
}
