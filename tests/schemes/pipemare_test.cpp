// PipeMare (schemes/pipemare.cpp): its LR rescheduling and its velocity recurrence against their
// oracles in docs/schemes.md, "Numbered oracles", and its runs: one stage equals `single`, and with both
// techniques off it is exactly vanilla asynchronous 1F1B.
#include <gtest/gtest.h>

#include "schemes/shared/pipemare.h"
#include "tests/support/helpers.h"

namespace pipelab::pipemare_test {
namespace {

TEST(Pipemare, LrReschedulingMatchesO3) {
  // eta = 0.1, K = 100, D = 4: tau_r = 3, 2, 1, 0.
  const auto lr = [](int tau, int64_t k) { return 0.1 * pipemare::lr_factor(tau, k, 100); };
  EXPECT_NEAR(lr(3, 1), 0.033702, 1e-6);
  EXPECT_NEAR(lr(3, 50), 0.057735, 1e-6);
  EXPECT_DOUBLE_EQ(lr(3, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr(3, 1000), 0.1);
  EXPECT_NEAR(lr(2, 1), 0.050348, 1e-6);
  EXPECT_NEAR(lr(2, 50), 0.070711, 1e-6);
  EXPECT_DOUBLE_EQ(lr(2, 100), 0.1);
  for (const int64_t k : {1, 50, 100}) {
    EXPECT_DOUBLE_EQ(lr(1, k), 0.1);
    EXPECT_DOUBLE_EQ(lr(0, k), 0.1);
  }
  // The LR rescheduling (docs/schemes.md, "pipemare") at D = 8, r = 0 (tau 7), K = 7000, as docs/schemes.md, "Numbered
  // oracles"'s oracle for nesterov_async's options gives it.
  EXPECT_NEAR(pipemare::lr_factor(7, 1, 7000), 0.142897, 1e-6);
  EXPECT_NEAR(pipemare::lr_factor(7, 3500, 7000), 0.377964, 1e-6);
  EXPECT_DOUBLE_EQ(pipemare::lr_factor(7, 7000, 7000), 1.0);
}

TEST(Pipemare, VelocityMatchesO4) {
  // Constant applied delta -0.01, decay 0.5, tau 3, W0 = 1: delta_n = (1 - 0.5^n) Delta and
  // the backward's estimate W_n - 3 delta_n.
  double delta = 0, w = 1;
  const std::vector<double> deltas{-0.005, -0.0075, -0.00875}, estimates{1.005, 1.0025, 0.99625};
  for (size_t n = 0; n < 3; ++n) {
    w += -0.01;
    delta = pipemare::velocity(delta, 0.5, -0.01);
    EXPECT_NEAR(delta, deltas[n], 1e-15);
    EXPECT_NEAR(w - 3 * delta, estimates[n], 1e-15);
  }
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3}
)";

TEST(Pipemare, OneStageEqualsSingle) {
  const std::vector<std::string> one{"partition.stages=1", "partition.balance=[4]"};
  std::vector<std::string> pm = one;
  pm.push_back("scheme={type: pipemare, rescheduling_steps: 20, correction: backward, velocity_decay: 0.5}");
  EXPECT_TRUE(testing::identical(testing::train(kMlp, one), testing::train(kMlp, pm)));
}

TEST(Pipemare, WithBothTechniquesOffItIsVanillaAsync) {
  const TensorDict async = testing::train(kMlp, {"scheme={type: async}"});
  const TensorDict off = testing::train(kMlp, {"scheme={type: pipemare, rescheduling_steps: 20, lr_rescheduling: false}"});
  EXPECT_TRUE(testing::identical(async, off));
  // Each technique changes the run (stage 0 has tau = 3).
  const TensorDict t1 = testing::train(kMlp, {"scheme={type: pipemare, rescheduling_steps: 20}"});
  EXPECT_GT(testing::max_difference(async, t1), 1e-4);
  const TensorDict t2 = testing::train(
      kMlp, {"scheme={type: pipemare, rescheduling_steps: 20, lr_rescheduling: false, correction: backward, "
             "velocity_decay: 0.5}"});
  EXPECT_GT(testing::max_difference(async, t2), 1e-6);
}

TEST(Pipemare, UnverifiedCoefficientsMustBeGiven) {
  EXPECT_NE(testing::user_error([] { testing::train(kMlp, {"scheme={type: pipemare}"}); }).find("rescheduling_steps"),
            std::string::npos);
  EXPECT_NE(testing::user_error([] {
              testing::train(kMlp, {"scheme={type: pipemare, rescheduling_steps: 5, correction: backward}"});
            }).find("velocity_decay"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::pipemare_test
