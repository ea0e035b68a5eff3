// resnet: torchvision's parameter counts, CIFAR variants, shapes and the named splits of
// SpecTrain, PipeOptim and torchgpipe.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::resnet_test {
namespace {

using V = std::vector<int>;

TEST(ZooResnet, ImagenetCountsMatchTorchvision) {
  const DataSpec imagenet = testing::images(3, 224, 224, 1000);
  const std::pair<int, int64_t> known[] = {{18, 11689512}, {34, 21797672}, {50, 25557032}, {101, 44549160}};
  for (const auto& [depth, count] : known) {
    const ModelDef def =
        testing::define_model(fmt::format("{{type: resnet, depth: {}, stem: imagenet}}", depth), imagenet);
    EXPECT_EQ(testing::parameter_count(def), count) << "ResNet-" << depth;
  }
}

TEST(ZooResnet, CifarCountsDerivedFromTorchvision) {
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  // ResNet-18 with the CIFAR stem: 11,689,512 - 7x7 stem conv (9,408) + 3x3 stem conv
  // (1,728) - 1000-way fc (513,000) + 10-way fc (5,130) = 11,173,962.
  EXPECT_EQ(testing::parameter_count(testing::define_model("{type: resnet, depth: 18}", cifar)), 11173962);
  // The interlocking example's "64,3/128,4/256,6/512,3" basic layout is ResNet-34:
  // 21,797,672 - 9,408 + 1,728 - 513,000 + 5,130 = 21,282,122, with the same blocks.
  const ModelDef layout = testing::define_model(R"({type: resnet, architecture: "64,3/128,4/256,6/512,3"})", cifar);
  EXPECT_EQ(testing::parameter_count(layout), 21282122);
  EXPECT_EQ(testing::block_names(layout),
            testing::block_names(testing::define_model("{type: resnet, depth: 34}", cifar)));
  // SpecTrain's ResNet-50 (ImageNet stem, 10 classes): 25,557,032 - 2048 x 990 - 990 = 23,528,522.
  EXPECT_EQ(testing::parameter_count(testing::define_model("{type: resnet, depth: 50, stem: imagenet}", cifar)),
            23528522);
  // A bottleneck architecture: 4x expansion, so "16,1/32,1" ends at 128 channels.
  const ModelDef small = testing::define_model(R"({type: resnet, architecture: "16,1/32,1", unit: bottleneck})", cifar);
  EXPECT_EQ(build_block(small, 3, 0).module.ptr()->named_parameters()["fc.weight"].size(1), 128);
}

TEST(ZooResnet, ForwardShapes) {
  std::vector<Block> r18 =
      testing::build_model(testing::define_model("{type: resnet, depth: 18}", testing::images(3, 32, 32, 10)));
  EXPECT_EQ(testing::forward(r18, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  // SpecTrain's quirk: the ImageNet stem on 32x32 images leaves 1x1 maps in layer4.
  std::vector<Block> r50 = testing::build_model(
      testing::define_model("{type: resnet, depth: 50, stem: imagenet}", testing::images(3, 32, 32, 10)));
  EXPECT_EQ(testing::forward(r50, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  std::vector<Block> imagenet = testing::build_model(
      testing::define_model("{type: resnet, depth: 18, stem: imagenet}", testing::images(3, 224, 224, 1000)));
  EXPECT_EQ(testing::forward(imagenet, torch::randn({2, 3, 224, 224})).sizes(), (std::vector<int64_t>{2, 1000}));
  // Units in between: layer2_0 halves the sides and widens to 128 through a projection.
  std::vector<Block> first(r18.begin(), r18.begin() + 4);  // stem, layer1_0, layer1_1, layer2_0
  EXPECT_EQ(first.back().name, "layer2_0");
  EXPECT_EQ(testing::forward(first, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 128, 16, 16}));
  EXPECT_TRUE(testing::parameter(first, "layer2_0.shortcut.conv.weight").defined());
  EXPECT_FALSE(testing::parameter(first, "layer1_1.shortcut.conv.weight").defined());
}

/// torchgpipe's ResNet-101 balance (layers of its flattened 370-layer Sequential: a 4-layer
/// stem, 11 layers per bottleneck, 3 head layers) as block counts, where every cut falls
/// between bottlenecks; empty otherwise.
V torchgpipe_to_blocks(const V& layers) {
  V blocks;
  int cut = 0, units_before = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    cut += layers[i];
    const bool last = i + 1 == layers.size();
    const int units = last ? 33 : (cut - 4) / 11;
    if (!last && (cut - 4) % 11 != 0) return {};
    blocks.push_back(units - units_before + (i == 0 ? 1 : 0) + (last ? 1 : 0));
    units_before = units;
  }
  return blocks;
}

TEST(ZooResnet, NamedSplits) {
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  const ModelDef r50 = testing::define_model("{type: resnet, depth: 50, stem: imagenet}", cifar);
  ASSERT_EQ(r50.blocks.size(), 18u);
  EXPECT_EQ(r50.named_balances.at("spectrain_2"), (V{15, 3}));
  EXPECT_EQ(r50.named_balances.at("spectrain_4"), (V{14, 1, 1, 2}));
  EXPECT_EQ(testing::stage_starts(r50, r50.named_balances.at("spectrain_4")),
            (std::vector<std::string>{"stem", "layer4_0", "layer4_1", "layer4_2"}));

  const ModelDef r101 =
      testing::define_model("{type: resnet, depth: 101, stem: imagenet}", testing::images(3, 224, 224, 1000));
  ASSERT_EQ(r101.blocks.size(), 35u);
  // docs/schemes.md, "PipeOptim scripts": stem+layer1 | layer2 + 3 units of layer3 | 10 units | 10 units + layer4 + fc.
  EXPECT_EQ(testing::stage_starts(r101, r101.named_balances.at("pipeoptim_4")),
            (std::vector<std::string>{"stem", "layer2_0", "layer3_3", "layer3_13"}));
  // docs/schemes.md, "torchgpipe benchmarks": pipeline-8 cuts only between bottlenecks; pipeline-4 and [140, 230] do
  // not.
  EXPECT_EQ(r101.named_balances.at("torchgpipe_8"), torchgpipe_to_blocks({26, 22, 33, 44, 44, 66, 66, 69}));
  EXPECT_EQ(r101.named_balances.at("torchgpipe_8"), (V{3, 2, 3, 4, 4, 6, 6, 7}));
  EXPECT_TRUE(torchgpipe_to_blocks({44, 92, 124, 110}).empty());
  EXPECT_TRUE(torchgpipe_to_blocks({140, 230}).empty());
  // [135, 235] cuts one ReLU before the end of unit 12, which we keep on the first stage.
  EXPECT_EQ(r101.named_balances.at("torchgpipe_2"), torchgpipe_to_blocks({136, 234}));
  for (const auto& [name, balance] : r101.named_balances) EXPECT_EQ(testing::total(balance), 35) << name;
  for (const auto& [name, balance] : r50.named_balances) EXPECT_EQ(testing::total(balance), 18) << name;
  // Other depths have no reference splits.
  EXPECT_TRUE(testing::define_model("{type: resnet, depth: 18}", cifar).named_balances.empty());
}

TEST(ZooResnet, InitialisedAsTorchvision) {
  const ModelDef def = testing::define_model("{type: resnet, depth: 18}", testing::images(3, 32, 32, 10));
  const auto p = build_block(def, 7, 0).module.ptr()->named_parameters();  // layer4_0
  // Kaiming normal, fan_out 512 x 3 x 3.
  EXPECT_NEAR(p["conv2.conv.weight"].std().item<double>(), std::sqrt(2.0 / 4608), 0.0003);
  EXPECT_EQ(p["conv2.bn.weight"].min().item<double>(), 1.0);
  EXPECT_EQ(p["conv2.bn.bias"].abs().max().item<double>(), 0.0);
  // The fc keeps LibTorch's default: U(-1/sqrt(512), 1/sqrt(512)) for weights and biases.
  const auto head = build_block(def, 9, 0).module.ptr()->named_parameters();
  EXPECT_LE(head["fc.bias"].abs().max().item<double>(), 1 / std::sqrt(512.0));
  EXPECT_GT(head["fc.bias"].abs().max().item<double>(), 0.0);
}

TEST(ZooResnet, RejectsBadOptions) {
  const DataSpec cifar = testing::images(3, 32, 32, 10);
  auto error = [&](const std::string& section) {
    return testing::user_error([&] { testing::define_model(section, cifar); });
  };
  EXPECT_NE(error("{type: resnet, depth: 20}").find("no standard ResNet has depth 20"), std::string::npos);
  EXPECT_NE(error(R"({type: resnet, architecture: "64,3/128"})").find("'128' is not 'width,count'"), std::string::npos);
  EXPECT_NE(error(R"({type: resnet, architecture: "64,3/128,x"})").find("not 'width,count'"), std::string::npos);
  EXPECT_NE(error(R"({type: resnet, depth: 50, architecture: "64,3"})").find("depth and architecture both set"),
            std::string::npos);
  // The resolved config of an architecture run (depth at its default) is accepted as is.
  EXPECT_EQ(error(R"({type: resnet, depth: 18, architecture: "64,3"})"), "");
}

}  // namespace
}  // namespace pipelab::resnet_test
