// mobilenet_v2: torchvision's parameter counts and layout, shapes.
#include <gtest/gtest.h>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::mobilenet_v2_test {
namespace {

TEST(ZooMobilenetV2, TorchvisionCountsAndForward) {
  const ModelDef def = testing::define_model("{type: mobilenet_v2}", testing::images(3, 224, 224, 1000));
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(testing::parameter_count(blocks), 3504872);
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 224, 224})).sizes(), (std::vector<int64_t>{2, 1000}));
  // torchvision's mobilenet_v2(width_mult=0.5): 1,968,680.
  EXPECT_EQ(testing::parameter_count(
                testing::define_model("{type: mobilenet_v2, width: 0.5}", testing::images(3, 224, 224, 1000))),
            1968680);
}

TEST(ZooMobilenetV2, BlocksAreTorchvisionFeatures) {
  const ModelDef def = testing::define_model("{type: mobilenet_v2, width: 0.5}", testing::images(3, 32, 32, 10));
  ASSERT_EQ(def.blocks.size(), 20u);
  EXPECT_EQ(def.blocks[0].name, "features_0");
  EXPECT_EQ(def.blocks[18].name, "features_18");
  EXPECT_EQ(def.blocks[19].name, "head");
  EXPECT_TRUE(def.named_balances.empty());
  std::vector<Block> blocks = testing::build_model(def);
  // Widths x 0.5 rounded to multiples of 8: 32 -> 16, 320 -> 160; the last conv keeps 1280.
  EXPECT_EQ(testing::parameter(blocks, "features_0.conv.weight").sizes(), (std::vector<int64_t>{16, 3, 3, 3}));
  EXPECT_EQ(testing::parameter(blocks, "features_18.conv.weight").sizes(), (std::vector<int64_t>{1280, 160, 1, 1}));
  // features_1 (t = 1) has no expansion conv; features_2 does; the depthwise conv is grouped.
  EXPECT_FALSE(testing::parameter(blocks, "features_1.expand.conv.weight").defined());
  EXPECT_EQ(testing::parameter(blocks, "features_2.depthwise.conv.weight").sizes(),
            (std::vector<int64_t>{48, 1, 3, 3}));
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(ZooMobilenetV2, ResidualOnlyWhereShapesAgree) {
  // features_3 (24 -> 24, stride 1) adds its input; features_2 (16 -> 24, stride 2) cannot.
  const ModelDef def = testing::define_model("{type: mobilenet_v2}", testing::images(3, 32, 32, 10));
  std::vector<Block> blocks = testing::build_model(def);
  for (Block& b : blocks) b.module.ptr()->eval();
  const torch::Tensor x = torch::randn({2, 24, 8, 8});
  torch::NoGradGuard no_grad;
  // Zeroing the projection's batch-norm scale and shift leaves only the shortcut.
  for (size_t i : {2, 3}) {
    auto p = blocks[i].module.ptr()->named_parameters();
    p["project.bn.weight"].zero_();
    p["project.bn.bias"].zero_();
  }
  EXPECT_TRUE(torch::equal(blocks[3].module.forward(x), x));
  EXPECT_EQ(blocks[2].module.forward(torch::randn({2, 16, 8, 8})).abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace pipelab::mobilenet_v2_test
