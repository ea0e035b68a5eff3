// inception_v3: torchvision's parameter count without aux logits, shapes, PipeOptim's split
// and initialisation.
#include <gtest/gtest.h>

#include "core/nn/batch_norm.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::inception_v3_test {
namespace {

TEST(ZooInceptionV3, TorchvisionCountAndForward) {
  const ModelDef def = testing::define_model("{type: inception_v3}", testing::images(3, 299, 299, 1000));
  ASSERT_EQ(def.blocks.size(), 17u);
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(testing::parameter_count(blocks), 23834568);
  EXPECT_EQ(testing::forward(blocks, torch::randn({1, 3, 299, 299})).sizes(), (std::vector<int64_t>{1, 1000}));
  // The stem leaves 192 x 35 x 35 of a 299 x 299 image.
  std::vector<Block> stem(blocks.begin(), blocks.begin() + 5);
  EXPECT_EQ(testing::forward(stem, torch::randn({1, 3, 299, 299})).sizes(), (std::vector<int64_t>{1, 192, 35, 35}));
  // No block depends on the input size (the head pools globally): the smallest input works.
  EXPECT_EQ(testing::forward(blocks, torch::randn({2, 3, 75, 75})).sizes(), (std::vector<int64_t>{2, 1000}));
}

TEST(ZooInceptionV3, SmallestInputAndSplit) {
  const ModelDef def = testing::define_model("{type: inception_v3}", testing::images(3, 75, 75, 10));
  const std::string msg =
      testing::user_error([] { testing::define_model("{type: inception_v3}", testing::images(3, 74, 74, 10)); });
  EXPECT_NE(msg.find("at least 75x75"), std::string::npos) << msg;
  // docs/schemes.md, "PipeOptim scripts": stem | 5b-6a | 6b-6d | 6e-7c + fc.
  EXPECT_EQ(testing::stage_starts(def, def.named_balances.at("pipeoptim_4")),
            (std::vector<std::string>{"Conv2d_1a_3x3", "Mixed_5b", "Mixed_6b", "Mixed_6e"}));
  EXPECT_EQ(testing::total(def.named_balances.at("pipeoptim_4")), 17);
}

TEST(ZooInceptionV3, TruncatedNormalInit) {
  const ModelDef def = testing::define_model("{type: inception_v3}", testing::images(3, 75, 75, 10));
  const auto p = build_block(def, 15, 0).module.ptr()->named_parameters();  // Mixed_7b
  const torch::Tensor w = p["branch3x3dbl.conv_2.conv.weight"];             // 384 x 448 x 3 x 3
  // N(0, 0.1) truncated at +-0.2: std 0.1 x 0.8796.
  EXPECT_LE(w.abs().max().item<double>(), 0.2);
  EXPECT_NEAR(w.std().item<double>(), 0.08796, 0.0005);
  // BasicConv2d's batch norm uses eps 1e-3.
  int norms = 0;
  for (const auto& m : build_block(def, 15, 0).module.ptr()->modules()) {
    if (const auto* bn = m->as<nn::BatchNormImpl>()) {
      EXPECT_EQ(bn->options().eps, 1e-3);
      ++norms;
    }
  }
  EXPECT_EQ(norms, 9);
}

}  // namespace
}  // namespace pipelab::inception_v3_test
