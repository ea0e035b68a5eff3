// unet: the blocks, their live sets and shapes, parameter counts by hand, and its options.
#include <gtest/gtest.h>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::unet_test {
namespace {

using Names = std::vector<std::string>;
using Shape = std::vector<int64_t>;

TEST(ZooUnet, BlocksSkipsAndShapes) {
  const ModelDef def = testing::define_model("{type: unet, depth: 3, channels: 8}", testing::images(3, 32, 32, 10));
  EXPECT_EQ(testing::block_names(def), (Names{"enc1", "enc2", "enc3", "bottom", "dec3", "dec2", "dec1", "head"}));
  const Dataflow flow = dataflow(def, "unet");
  EXPECT_EQ(flow.live[3], (Names{"x", "skip1", "skip2", "skip3"}));
  EXPECT_EQ(flow.skips[5], (Names{"skip1", "skip2"}));
  EXPECT_EQ(flow.live.back(), (Names{"x"}));
  std::vector<Block> blocks = testing::build_model(def);
  std::vector<Block> down(blocks.begin(), blocks.begin() + 4);
  const LiveSet live = testing::live_after(down, torch::randn({2, 3, 32, 32}));
  EXPECT_EQ(live.get("x").sizes(), (Shape{2, 64, 4, 4}));
  EXPECT_EQ(live.get("skip1").sizes(), (Shape{2, 8, 32, 32}));
  EXPECT_EQ(live.get("skip3").sizes(), (Shape{2, 32, 8, 8}));
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 32, 32})).sizes(), (Shape{2, 10}));
}

TEST(ZooUnet, ParameterCountByHand) {
  // depth 1, C = 4, no batch norm, 3 input channels, 5 classes:
  // enc1: 3x3 convs 3->4 and 4->4 with biases: (108 + 4) + (144 + 4) = 260;
  // bottom: 4->8, 8->8: (288 + 8) + (576 + 8) = 880;
  // dec1: transposed 2x2 8->4 (128 + 4), convs 8->4, 4->4: (288 + 4) + (144 + 4) = 572;
  // head: 1x1 4->5: 20 + 5 = 25.
  const ModelDef def = testing::define_model("{type: unet, depth: 1, channels: 4, batch_norm: false}",
                                             testing::images(3, 8, 8, 5));
  EXPECT_EQ(testing::parameter_count(def), 260 + 880 + 572 + 25);
  // Batch norm replaces each conv's bias by a scale and a shift: 6 convs of 3x3 gain 4, 4,
  // 8, 8, 4, 4 parameters.
  const ModelDef bn = testing::define_model("{type: unet, depth: 1, channels: 4}", testing::images(3, 8, 8, 5));
  EXPECT_EQ(testing::parameter_count(bn), 260 + 880 + 572 + 25 + 32);
}

TEST(ZooUnet, RejectsSidesItCannotHalve) {
  const std::string error = testing::user_error(
      [] { testing::define_model("{type: unet, depth: 3}", testing::images(3, 28, 28, 10)); });
  EXPECT_NE(error.find("3 down-sampling steps need image sides that are multiples of 8, got 28x28"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace pipelab::unet_test
