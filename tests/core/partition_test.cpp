// Cutting blocks into stages.
#include <gtest/gtest.h>

#include "core/model/partition.h"

namespace pipelab {
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
  EXPECT_EQ(resolve_balance(counts, 2, {1, 1, 1, 1}, {}, source), (V{1, 3}));
  Balance named;
  named.kind = Balance::Kind::Named;
  named.name = "paper_2";
  EXPECT_EQ(resolve_balance(named, 2, {1, 1, 1, 1}, {{"paper_2", {3, 1}}}, source), (V{3, 1}));
  Balance automatic;
  // Parameter-free blocks count as 1: [2, 2] keeps the largest stage at 101 (vs 102 for [3, 1]).
  EXPECT_EQ(resolve_balance(automatic, 2, {0, 0, 100, 0}, {}, source), (V{2, 2}));
  EXPECT_EQ(resolve_balance(automatic, 2, {50, 0, 100, 0}, {}, source), (V{2, 2}));
  EXPECT_EQ(resolve_balance(automatic, 3, {50, 60, 100, 30}, {}, source), (V{2, 1, 1}));
}

}  // namespace
}  // namespace pipelab
