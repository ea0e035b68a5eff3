// googlenet: the CIFAR GoogLeNet's parameter count, shapes and SpecTrain's splits.
#include <gtest/gtest.h>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::googlenet_test {
namespace {

using V = std::vector<int>;

TEST(ZooGooglenet, CountAndShapes) {
  // Derived by hand (conv weights + conv biases + 2 x bn channels per conv): pre 5,760;
  // a3 165,552; b3 424,096; a4 386,016; b4 462,936; c4 523,912; d4 611,072; e4 952,704;
  // a5 1,127,808; b5 1,496,144; fc 1024 x 10 + 10 = 10,250; total 6,166,250. E.g. a3 =
  // 1x1 192->64 (12,352) + 1x1 192->96 (18,528) + 3x3 96->128 (110,720) + 1x1 192->16
  // (3,088) + 3x3 16->32 (4,640) + 3x3 32->32 (9,248) + 1x1 192->32 (6,176), each + 2 x out.
  const ModelDef def = testing::define_model("{type: googlenet}", testing::images(3, 32, 32, 10));
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(count_parameters(*blocks[1].module.ptr()), 165552);
  EXPECT_EQ(testing::parameter_count(blocks), 6166250);
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  // b3 ends with the 3x3/2 max-pool: 480 channels at 16x16.
  std::vector<Block> first(blocks.begin(), blocks.begin() + 3);
  EXPECT_EQ(testing::forward(first, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 480, 16, 16}));
}

TEST(ZooGooglenet, SpectrainSplits) {
  const ModelDef def = testing::define_model("{type: googlenet}", testing::images(3, 32, 32, 10));
  ASSERT_EQ(def.blocks.size(), 11u);
  // docs/schemes.md, "SpecTrain: models and module-to-stage maps": pre+a3 | b3+pool | a4+b4 | c4...b5+head.
  EXPECT_EQ(testing::stage_starts(def, def.named_balances.at("spectrain_4")),
            (std::vector<std::string>{"pre", "b3", "a4", "c4"}));
  EXPECT_EQ(def.named_balances.at("spectrain_2"), (V{3, 8}));
  EXPECT_EQ(testing::total(def.named_balances.at("spectrain_4")), 11);
}

}  // namespace
}  // namespace pipelab::googlenet_test
