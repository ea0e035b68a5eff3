// Cutting blocks into stages.
#include <gtest/gtest.h>

#include "core/model/block_costs.h"
#include "core/model/partition.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

namespace pipelab::partition_test {
namespace {

using V = std::vector<int>;

TEST(Partition, BalanceByWeightMinimisesTheLargestStage) {
  EXPECT_EQ(balance_by_weight({1, 1, 1, 1}, 2), (V{2, 2}));
  EXPECT_EQ(balance_by_weight({10, 1, 1, 1, 1}, 2), (V{1, 4}));
  EXPECT_EQ(balance_by_weight({1, 1, 1, 10}, 2), (V{3, 1}));
  EXPECT_EQ(balance_by_weight({5, 5, 5, 5, 5, 5}, 3), (V{2, 2, 2}));
  EXPECT_EQ(balance_by_weight({3, 1, 4, 1, 5}, 5), (V{1, 1, 1, 1, 1}));
  EXPECT_EQ(balance_by_weight({1, 1, 1}, 1), (V{3}));
  // 200 / 100+100 / 50+50+100: the largest stage cannot be below 200.
  EXPECT_EQ(balance_by_weight({200, 100, 100, 50, 50, 100}, 3), (V{1, 2, 3}));
}

TEST(Partition, ResolveAcceptsCountsAndNamedSplits) {
  ConfigSource source("p.yaml");
  Balance counts;
  counts.kind = Balance::Kind::Counts;
  counts.counts = {1, 3};
  const auto none = [](Balance::Kind) -> std::vector<double> { throw std::logic_error("no cost needed"); };
  EXPECT_EQ(resolve_balance(counts, 2, 4, none, {}, source), (V{1, 3}));
  Balance named;
  named.kind = Balance::Kind::Named;
  named.name = "paper_2";
  EXPECT_EQ(resolve_balance(named, 2, 4, none, {{"paper_2", {3, 1}}}, source), (V{3, 1}));
  // A measured kind asks for its costs (auto asks for flops) and splits them optimally.
  std::vector<Balance::Kind> asked;
  const auto costs = [&](Balance::Kind k) {
    asked.push_back(k);
    return k == Balance::Kind::Flops ? std::vector<double>{50, 60, 100, 30} : std::vector<double>{1, 1, 101, 1};
  };
  Balance automatic;
  EXPECT_EQ(resolve_balance(automatic, 3, 4, costs, {}, source), (V{2, 1, 1}));
  Balance params;
  params.kind = Balance::Kind::Params;
  EXPECT_EQ(resolve_balance(params, 2, 4, costs, {}, source), (V{2, 2}));  // largest stage 102, not 103
  EXPECT_EQ(asked, (std::vector<Balance::Kind>{Balance::Kind::Flops, Balance::Kind::Params}));
}

TEST(Partition, MeasuredBlockCosts) {
  // Two Linear blocks of 8x16 and 16x4 and a ReLU between them, over 3 examples.
  std::vector<Block> blocks{{"a", torch::nn::AnyModule(torch::nn::Linear(8, 16))},
                            {"r", torch::nn::AnyModule(torch::nn::ReLU())},
                            {"b", torch::nn::AnyModule(torch::nn::Linear(16, 4))}};
  const at::Tensor x = at::randn({3, 8});
  EXPECT_EQ(block_params(blocks), (std::vector<double>{8 * 16 + 16, 1, 16 * 4 + 4}));
  const std::vector<double> flops = block_flops(blocks, x);
  EXPECT_EQ(flops[0], 2.0 * 3 * 8 * 16);  // addmm: 2 x M x K x N
  EXPECT_EQ(flops[2], 2.0 * 3 * 16 * 4);
  EXPECT_GT(flops[1], 0);  // a free block still costs a little
  EXPECT_LT(flops[1], flops[2]);
  const std::vector<double> memory = block_memory(blocks, x);
  EXPECT_EQ(memory[0], 3.0 * 4 * (8 * 16 + 16) + 3 * 16 * 4 + 1);
  const std::vector<double> seconds = block_seconds(blocks, x, c10::kCPU, 2);
  ASSERT_EQ(seconds.size(), 3u);
  for (double s : seconds) EXPECT_GT(s, 0);
  EXPECT_TRUE(blocks[0].module.ptr()->parameters()[0].device().is_cpu());
}

}  // namespace
}  // namespace pipelab::partition_test
