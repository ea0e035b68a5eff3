/// `googlenet`: the CIFAR GoogLeNet that SpecTrain trains (`models/googlenet`,
/// docs/schemes.md, "SpecTrain: models and module-to-stage maps"; Szegedy et al. 2015 with batch norm and no auxiliary
/// heads), one block per inception module: "pre" (3x3 conv to 192 + bn + ReLU), "a3", "b3" (+ 3x3/2 max-pool),
/// "a4", "b4", "c4", "d4", "e4" (+ max-pool), "a5", "b5", "head" (global average pool -> fc).
/// An inception module concatenates four branches: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3 (the
/// CIFAR code's stand-in for 5x5); 3x3/1 max-pool -> 1x1. Every conv has a bias and is
/// followed by bn and ReLU, as in the reference.
///
/// `variant: torchvision` is torchvision's GoogLeNet instead, so that its ImageNet weights load
/// with `init.names: torchvision`: a "stem" block (7x7/2 conv to 64, 3x3/2 max-pool, 1x1 conv,
/// 3x3 conv to 192, 3x3/2 max-pool, the pools with ceil_mode), convs without bias and batch
/// norm with eps 0.001, the third branch 1x1 -> 3x3 (torchvision's stand-in for 5x5), the
/// pools after b3 and e4 3x3/2 and 2x2/2 with ceil_mode, dropout 0.2 before the fc; its
/// auxiliary classifiers, used in training only, are not built (their weights are dropped).
///
/// Initialisation as SpecTrain's stages: Kaiming-normal fan_out convs, zero conv biases,
/// N(0, 0.01) linear with zero bias.
///
/// Named splits: SpecTrain's modules are pre+a3 | b3+pool | a4+b4 | c4 ... b5 + head, so the
/// maps [0,0,1,1,1] and [0,1,2,3,3] (docs/schemes.md, "SpecTrain: models and module-to-stage maps") give `spectrain_2`
/// = [3, 8] and `spectrain_4` = [2, 1, 2, 6].
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

enum class GoogleVariant { Cifar, Torchvision };

struct GooglenetOptions {
  GoogleVariant variant = GoogleVariant::Cifar;
  template <class V>
  void fields(V& v) {
    v.choice("variant", variant,
             Choices<GoogleVariant>{{"cifar", GoogleVariant::Cifar}, {"torchvision", GoogleVariant::Torchvision}},
             "cifar: SpecTrain's CIFAR GoogLeNet; torchvision: torchvision's layout (ImageNet stem), whose weights "
             "load with init.names: torchvision");
  }
};

/// The widths of one inception module (the names of the reference code).
struct InceptionSpec {
  const char* name;
  int64_t in, n1x1, n3x3red, n3x3, n5x5red, n5x5, pool_planes;
  bool pool_after;
};

constexpr InceptionSpec kModules[] = {
    {"a3", 192, 64, 96, 128, 16, 32, 32, false},     {"b3", 256, 128, 128, 192, 32, 96, 64, true},
    {"a4", 480, 192, 96, 208, 16, 48, 64, false},    {"b4", 512, 160, 112, 224, 24, 64, 64, false},
    {"c4", 512, 128, 128, 256, 24, 64, 64, false},   {"d4", 512, 112, 144, 288, 32, 64, 64, false},
    {"e4", 528, 256, 160, 320, 32, 128, 128, true},  {"a5", 832, 256, 160, 320, 32, 128, 128, false},
    {"b5", 832, 384, 192, 384, 48, 128, 128, false},
};

/// conv -> bn -> ReLU: with a bias in the CIFAR code, without (and bn eps 0.001) in torchvision's.
Sequence basic_conv(int64_t in, int64_t out, int64_t kernel, bool torchvision = false, int64_t stride = 1) {
  ConvBnOptions o = ConvBnOptions(in, out, kernel).padding(kernel / 2).stride(stride).bias(!torchvision);
  if (torchvision) o.eps(1e-3);
  return conv_bn(o);
}

torch::nn::MaxPool2d max_pool(int64_t stride) {
  return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(stride).padding(1));
}

/// torchvision's pools: ceil_mode, no padding unless given.
torch::nn::MaxPool2d ceil_pool(int64_t kernel, int64_t stride, int64_t padding = 0) {
  return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(kernel).stride(stride).padding(padding).ceil_mode(true));
}

Branches inception(const InceptionSpec& s, bool tv) {
  Branches b;
  b->add("b1", basic_conv(s.in, s.n1x1, 1, tv));
  Sequence b2;
  b2->add("conv1", basic_conv(s.in, s.n3x3red, 1, tv)).add("conv2", basic_conv(s.n3x3red, s.n3x3, 3, tv));
  b->add("b2", b2);
  Sequence b3;
  b3->add("conv1", basic_conv(s.in, s.n5x5red, 1, tv)).add("conv2", basic_conv(s.n5x5red, s.n5x5, 3, tv));
  if (!tv) b3->add("conv3", basic_conv(s.n5x5, s.n5x5, 3));
  b->add("b3", b3);
  Sequence b4;
  if (tv) {
    b4->add("pool", ceil_pool(3, 1, 1));
  } else {
    b4->add("pool", max_pool(1));
  }
  b4->add("conv", basic_conv(s.in, s.pool_planes, 1, tv));
  b->add("b4", b4);
  if (s.pool_after && tv) b->then("pool", std::string(s.name) == "b3" ? ceil_pool(3, 2) : ceil_pool(2, 2));
  if (s.pool_after && !tv) b->then("pool", max_pool(2));
  return b;
}

/// torchvision's stem: conv1, maxpool1, conv2, conv3, maxpool2.
Sequence torchvision_stem(int64_t channels) {
  Sequence stem;
  stem->add("conv1", basic_conv(channels, 64, 7, true, 2))
      .add("pool1", ceil_pool(3, 2))
      .add("conv2", basic_conv(64, 64, 1, true))
      .add("conv3", basic_conv(64, 192, 3, true))
      .add("pool2", ceil_pool(3, 2));
  return stem;
}

class Googlenet : public Configured<ModelFactory, GooglenetOptions> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    const bool tv = options_.variant == GoogleVariant::Torchvision;
    const ImageShape image = tv ? image_input(*this, data, 32, "the stem's and modules' five stride-2 steps")
                                : image_input(*this, data);
    const int64_t channels = image.channels, classes = data.classes;
    ModelDef def;
    if (tv) {
      def.blocks.push_back({"stem", [=] { return initialised(torchvision_stem(channels), init_spectrain); }});
    } else {
      def.blocks.push_back({"pre", [=] { return initialised(basic_conv(channels, 192, 3), init_spectrain); }});
    }
    for (const InceptionSpec& s : kModules) {
      def.blocks.push_back({s.name, [s, tv] { return initialised(inception(s, tv), init_spectrain); }});
    }
    def.blocks.push_back({"head", [=] {
                            ClassifierOptions head;
                            if (tv) head.dropout = 0.2;
                            return initialised(classifier(1024, classes, head), init_spectrain);
                          }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    def.named_balances = {{"spectrain_2", {3, 8}}, {"spectrain_4", {2, 1, 2, 6}}};
    if (tv) {
      def.published_names["torchvision"] = {
          {R"(conv(\d)\.(.*))", R"(stem.conv\1.\2)"},
          {R"(inception(\d)([a-e])\.branch1\.(.*))", R"(\2\1.b1.\3)"},
          {R"(inception(\d)([a-e])\.branch([23])\.0\.(.*))", R"(\2\1.b\3.conv1.\4)"},
          {R"(inception(\d)([a-e])\.branch([23])\.1\.(.*))", R"(\2\1.b\3.conv2.\4)"},
          {R"(inception(\d)([a-e])\.branch4\.1\.(.*))", R"(\2\1.b4.conv.\3)"},
          {R"(aux[12]\..*)", ""},
          {R"(fc\.(.*))", R"(head.fc.\1)"}};
    }
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Googlenet, "googlenet",
                 "GoogLeNet for CIFAR (batch norm, no aux heads) or in torchvision's layout, one block per inception "
                 "module");
}
