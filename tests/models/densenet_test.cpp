// densenet121: torchvision's parameter count, the CIFAR variant, shapes and SpecTrain's splits.
#include <gtest/gtest.h>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::densenet_test {
namespace {

using V = std::vector<int>;

TEST(ZooDensenet, ParameterCounts) {
  EXPECT_EQ(testing::parameter_count(
                testing::define_model("{type: densenet121, stem: imagenet}", testing::images(3, 224, 224, 1000))),
            7978856);
  // The CIFAR variant: 7,978,856 - 7x7 stem conv (9,408) - its batch norm (128) + 3x3 stem
  // conv (1,728) - 1000-way fc (1,025,000) + 10-way fc (10,250) = 6,956,298.
  const ModelDef cifar = testing::define_model("{type: densenet121}", testing::images(3, 32, 32, 10));
  std::vector<Block> blocks = testing::build_model(cifar);
  EXPECT_EQ(testing::parameter_count(blocks), 6956298);
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  // Each dense layer appends 32 channels: 64 + 6 x 32 = 256 after dense block 1.
  std::vector<Block> first(blocks.begin(), blocks.begin() + 7);
  EXPECT_EQ(first.back().name, "dense1_6");
  EXPECT_EQ(testing::forward(first, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 256, 32, 32}));
  EXPECT_EQ(testing::parameter(blocks, "trans1.conv.weight").sizes(), (std::vector<int64_t>{128, 256, 1, 1}));
}

TEST(ZooDensenet, ImagenetStemForward) {
  std::vector<Block> blocks = testing::build_model(
      testing::define_model("{type: densenet121, stem: imagenet}", testing::images(3, 64, 64, 1000)));
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 64, 64})).sizes(), (std::vector<int64_t>{2, 1000}));
  const std::string msg = testing::user_error(
      [] { testing::define_model("{type: densenet121, stem: imagenet}", testing::images(3, 16, 16, 10)); });
  EXPECT_NE(msg.find("at least 32x32"), std::string::npos) << msg;
}

TEST(ZooDensenet, OneBlockPerLayerAndSpectrainSplits) {
  const ModelDef def = testing::define_model("{type: densenet121}", testing::images(3, 32, 32, 10));
  // stem + 58 dense layers + 3 transitions + head.
  ASSERT_EQ(def.blocks.size(), 63u);
  EXPECT_EQ(def.named_balances.at("spectrain_2"), (V{8, 55}));
  EXPECT_EQ(def.named_balances.at("spectrain_4"), (V{8, 13, 25, 17}));
  // docs/schemes.md, "SpecTrain: models and module-to-stage maps": dense+transition x 3, then dense4 + head.
  EXPECT_EQ(testing::stage_starts(def, def.named_balances.at("spectrain_4")),
            (std::vector<std::string>{"stem", "dense2_1", "dense3_1", "dense4_1"}));
  EXPECT_EQ(def.blocks[7].name, "trans1");
  // Other block layouts get their own module splits.
  const ModelDef small =
      testing::define_model("{type: densenet121, blocks: [1, 2, 1, 1], growth: 8}", testing::images(3, 32, 32, 10));
  EXPECT_EQ(small.named_balances.at("spectrain_4"), (V{3, 3, 2, 2}));
  EXPECT_EQ(testing::total(small.named_balances.at("spectrain_2")), static_cast<int>(small.blocks.size()));
}

}  // namespace
}  // namespace pipelab::densenet_test
