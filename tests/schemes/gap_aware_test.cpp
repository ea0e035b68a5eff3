// Gap-Aware (core/weights/gap_aware.h) inside PipeDream's weight stashing, against oracle O13:
// one stage with delay 1, SGD with momentum, constant gradient 1.
#include <gtest/gtest.h>

#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab {
namespace {

testing::ToyConfig constant_gradient(int steps) {
  testing::ToyConfig c;
  c.init = {1, 1, 1, 1};
  c.lr = 0.1;
  c.momentum = 0.9;
  c.examples = steps;
  c.constant_gradient = true;
  return c;
}

TEST(GapAware, MatchesO13OnTheStageWithDelayOne) {
  // Two stages: stage 0 (w_0 = 1) applies Gap-Aware, the last stage never does.
  const testing::ToyResult r = testing::run_toy("{type: pipedream, gap_aware: all_except_last}", constant_gradient(2));
  // Step 1 (d = 0): no penalty, W_1 = 0.9. Step 2 (d = 1): A = 0.001, C = 0.0707283634,
  // Gap = 0.1, P = 2.41385994, g' = 0.414274242, v_2 = 1.31427424, W_2 = 0.768572576.
  EXPECT_NEAR(r.weights[0], 0.768572576, 1e-9);
  EXPECT_NEAR(r.weights[1], 0.768572576, 1e-9);
  // Without it (and on the last stage): plain momentum SGD, W_2 = 0.71.
  EXPECT_NEAR(r.weights[2], 0.71, 1e-12);
  EXPECT_NEAR(r.weights[3], 0.71, 1e-12);
  const testing::ToyResult off = testing::run_toy("{type: pipedream}", constant_gradient(2));
  EXPECT_NEAR(off.weights[0], 0.71, 1e-12);
}

TEST(GapAware, StagePoliciesAndOptimizers) {
  // almost_last_partition at 2 stages is stage 0 too; all_except_last_two is nobody.
  EXPECT_NEAR(testing::run_toy("{type: pipedream, gap_aware: almost_last_partition}", constant_gradient(2)).weights[0],
              0.768572576, 1e-9);
  EXPECT_NEAR(testing::run_toy("{type: pipedream, gap_aware: all_except_last_two}", constant_gradient(2)).weights[0],
              0.71, 1e-12);
  testing::ToyConfig adam = constant_gradient(2);
  adam.optimizer = "{type: adam, lr: 0.001}";
  EXPECT_NE(testing::user_error([&] { testing::run_toy("{type: pipedream, gap_aware: all_except_last}", adam); })
                .find("implemented for SGD"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab
