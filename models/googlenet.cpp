/// `googlenet`: the CIFAR GoogLeNet that SpecTrain trains (`models/googlenet`,
/// docs/schemes.md §6.3; Szegedy et al. 2015 with batch norm and no auxiliary heads), one block
/// per inception module: "pre" (3x3 conv to 192 + bn + ReLU), "a3", "b3" (+ 3x3/2 max-pool),
/// "a4", "b4", "c4", "d4", "e4" (+ max-pool), "a5", "b5", "head" (global average pool -> fc).
/// An inception module concatenates four branches: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3 (the
/// CIFAR code's stand-in for 5x5); 3x3/1 max-pool -> 1x1. Every conv has a bias and is
/// followed by bn and ReLU, as in the reference.
///
/// Initialisation as SpecTrain's stages: Kaiming-normal fan_out convs, zero conv biases,
/// N(0, 0.01) linear with zero bias.
///
/// Named splits: SpecTrain's modules are pre+a3 | b3+pool | a4+b4 | c4 ... b5 + head, so the
/// maps [0,0,1,1,1] and [0,1,2,3,3] (§6.3) give `spectrain_2` = [3, 8] and `spectrain_4` =
/// [2, 1, 2, 6].
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

struct GooglenetOptions {
  template <class V>
  void fields(V&) {}
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

/// conv (with bias) -> bn -> ReLU.
Sequence conv(int64_t in, int64_t out, int64_t kernel) {
  return conv_bn(ConvBnOptions(in, out, kernel).padding(kernel / 2).bias(true));
}

torch::nn::MaxPool2d max_pool(int64_t stride) {
  return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(stride).padding(1));
}

Branches inception(const InceptionSpec& s) {
  Branches b;
  b->add("b1", conv(s.in, s.n1x1, 1));
  Sequence b2;
  b2->add("conv1", conv(s.in, s.n3x3red, 1)).add("conv2", conv(s.n3x3red, s.n3x3, 3));
  b->add("b2", b2);
  Sequence b3;
  b3->add("conv1", conv(s.in, s.n5x5red, 1))
      .add("conv2", conv(s.n5x5red, s.n5x5, 3))
      .add("conv3", conv(s.n5x5, s.n5x5, 3));
  b->add("b3", b3);
  Sequence b4;
  b4->add("pool", max_pool(1)).add("conv", conv(s.in, s.pool_planes, 1));
  b->add("b4", b4);
  if (s.pool_after) b->then("pool", max_pool(2));
  return b;
}

class Googlenet : public Configured<ModelFactory, GooglenetOptions> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data);
    const int64_t channels = image.channels, classes = data.classes;
    ModelDef def;
    def.blocks.push_back({"pre", [=] { return initialised(conv(channels, 192, 3), init_spectrain); }});
    for (const InceptionSpec& s : kModules) {
      def.blocks.push_back({s.name, [s] { return initialised(inception(s), init_spectrain); }});
    }
    def.blocks.push_back({"head", [=] { return initialised(classifier(1024, classes), init_spectrain); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    def.named_balances = {{"spectrain_2", {3, 8}}, {"spectrain_4", {2, 1, 2, 6}}};
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Googlenet, "googlenet",
                 "GoogLeNet for CIFAR (batch norm, no aux heads), one block per inception module");
}
