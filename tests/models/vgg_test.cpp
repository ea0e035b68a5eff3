// vgg16: parameter counts, shapes, SpecTrain's splits and initialisation.
#include <gtest/gtest.h>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::vgg_test {
namespace {

using V = std::vector<int>;

TEST(ZooVgg, SpectrainVariantIsTorchvisionVgg16) {
  // The adaptive 7x7 pooling makes the count independent of the input size, so one build at
  // 32x32 checks torchvision's VGG16 count (138,357,544 with 1000 classes) and the forward.
  const ModelDef def = testing::define_model("{type: vgg16}", testing::images(3, 32, 32, 1000));
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(testing::parameter_count(blocks), 138357544);
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 1000}));
  EXPECT_TRUE(testing::parameter(blocks, "conv1.conv.bias").defined());
  EXPECT_FALSE(testing::parameter(blocks, "conv1.bn.weight").defined());
  EXPECT_EQ(testing::parameter(blocks, "fc1.linear.weight").sizes(), (std::vector<int64_t>{4096, 25088}));
}

TEST(ZooVgg, CifarVariantCount) {
  // Derived: the 13 convs with biases 14,714,688 (torchvision's VGG16 features) + batch norm
  // 2 x (2x64 + 2x128 + 3x256 + 6x512) = 8,448 + fc 512->512 twice (262,656 each) +
  // 512->10 (5,130) = 15,253,578.
  const ModelDef def = testing::define_model("{type: vgg16, variant: cifar}", testing::images(3, 32, 32, 10));
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(testing::parameter_count(blocks), 15253578);
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_TRUE(testing::parameter(blocks, "conv13.bn.weight").defined());
  // Larger images are pooled to 512 features before the classifier.
  std::vector<Block> big =
      testing::build_model(testing::define_model("{type: vgg16, variant: cifar}", testing::images(3, 64, 48, 10)));
  EXPECT_EQ(testing::forward(big, torch::randn({2, 3, 64, 48})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(ZooVgg, SixteenBlocksAndSpectrainSplits) {
  for (const char* variant : {"spectrain", "cifar"}) {
    const ModelDef def =
        testing::define_model(std::string("{type: vgg16, variant: ") + variant + "}", testing::images(3, 32, 32, 10));
    ASSERT_EQ(def.blocks.size(), 16u) << variant;
    EXPECT_EQ(def.blocks.front().name, "conv1");
    EXPECT_EQ(def.blocks[12].name, "conv13");
    EXPECT_EQ(def.blocks.back().name, "fc3");
    // docs/schemes.md, "SpecTrain: models and module-to-stage maps": modules 0-3 | 4-15 and 0-1 | 2-4 | 5-9 | 10-15.
    EXPECT_EQ(def.named_balances.at("spectrain_2"), (V{4, 12}));
    EXPECT_EQ(def.named_balances.at("spectrain_4"), (V{2, 3, 5, 6}));
    EXPECT_EQ(testing::stage_starts(def, def.named_balances.at("spectrain_4")),
              (std::vector<std::string>{"conv1", "conv3", "conv6", "conv11"}));
  }
}

TEST(ZooVgg, InitialisedAsSpecTrain) {
  const ModelDef def = testing::define_model("{type: vgg16, variant: cifar}", testing::images(3, 32, 32, 10));
  const Block conv = build_block(def, 12, 0), fc = build_block(def, 13, 0);
  const auto cp = conv.module.ptr()->named_parameters(), fp = fc.module.ptr()->named_parameters();
  // Kaiming normal with fan_out 512 x 3 x 3: std sqrt(2 / 4608) = 0.02083.
  EXPECT_NEAR(cp["conv.weight"].std().item<double>(), 0.02083, 0.0003);
  EXPECT_EQ(cp["conv.bias"].abs().max().item<double>(), 0.0);
  EXPECT_NEAR(fp["linear.weight"].std().item<double>(), 0.01, 0.0002);
  EXPECT_EQ(fp["linear.bias"].abs().max().item<double>(), 0.0);
  // Blocks are seeded: the same block twice is the same tensor.
  EXPECT_TRUE(torch::equal(cp["conv.weight"], build_block(def, 12, 0).module.ptr()->named_parameters()["conv.weight"]));
}

TEST(ZooVgg, RejectsImagesTooSmallOrNotImages) {
  const std::string msg =
      testing::user_error([] { testing::define_model("{type: vgg16}", testing::images(3, 16, 16, 10)); });
  EXPECT_NE(msg.find("at least 32x32"), std::string::npos) << msg;
  DataSpec flat;
  flat.input_shape = {784};
  flat.classes = 10;
  const std::string flat_msg = testing::user_error([&] { testing::define_model("{type: vgg16}", flat); });
  EXPECT_NE(flat_msg.find("needs image data"), std::string::npos) << flat_msg;
  const std::string bad = testing::user_error(
      [] { testing::define_model("{type: vgg16, variant: tiny}", testing::images(3, 32, 32, 10)); });
  EXPECT_NE(bad.find("'tiny' is not one of spectrain, cifar"), std::string::npos) << bad;
}

}  // namespace
}  // namespace pipelab::vgg_test
