// The Nesterov asynchronous scheme (schemes/nesterov_async.cpp) as AsyncPP's code runs it: adaptive
// momentum against its D = 8 oracle (docs/schemes.md, "Numbered oracles"), one stage equal to single-device NAdam,
// and with AdamW exactly PipeDream's weight stashing with the ring reset at every epoch (an
// equivalence); clipping and the LR correction change the run. Variant paper (the delayed Nesterov
// update, docs/schemes.md, "nesterov_async") against its oracle in docs/schemes.md, "Numbered oracles" on f(w) = w^2 /
// 2.
#include <gtest/gtest.h>

#include "schemes/nesterov_async.h"
#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::nesterov_async_test {
namespace {

TEST(NesterovAsync, AdaptiveMomentumMatchesO7) {
  const std::vector<double> expected{0.97875, 0.9675, 0.95625, 0.945, 0.93375, 0.9225, 0.91125, 0.9};
  for (int r = 0; r < 8; ++r) EXPECT_NEAR(nesterov_async::adaptive_beta1(0.9, r, 8), expected[static_cast<size_t>(r)], 1e-12);
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: single}
optimizer: {type: nadam, lr: 0.01, betas: [0.99, 0.999], weight_decay: 0.01, decoupled_weight_decay: true}
run:       {epochs: 2, batch_size: 16, seed: 3}
)";

TEST(NesterovAsync, OneStageIsPlainNadam) {
  const std::vector<std::string> one{"partition.stages=1", "partition.balance=[4]"};
  std::vector<std::string> na = one;
  na.push_back("scheme={type: nesterov_async, clip: 0, adaptive_momentum: true, lr_correction_steps: 10}");
  // At D = 1 there is no delay: w_0 = 0, so the momentum and the LR keep their base values.
  EXPECT_TRUE(testing::identical(testing::train(kMlp, one), testing::train(kMlp, na)));
}

TEST(NesterovAsync, WithAdamWItIsPipedreamStashingResetEveryEpoch) {
  const std::string adamw = "optimizer={type: adamw, lr: 0.01, weight_decay: 0.01}";
  const TensorDict pipedream = testing::train(kMlp, {adamw, "scheme={type: pipedream, variant: paper}"});
  const TensorDict nesterov = testing::train(kMlp, {adamw, "scheme={type: nesterov_async, clip: 0}"});
  EXPECT_TRUE(testing::identical(pipedream, nesterov));
}

TEST(NesterovAsync, ClipMomentumAndLrCorrectionEachChangeTheRun) {
  // beta1 = 0.9: the adaptive momentum raises it towards 0.99 on the early stages (with the
  // code's 0.99 it would change nothing).
  const std::string betas = "optimizer.betas=[0.9, 0.999]";
  const TensorDict base = testing::train(kMlp, {betas, "scheme={type: nesterov_async, clip: 0}"});
  for (const char* scheme : {"scheme={type: nesterov_async, clip: 0.001}",
                             "scheme={type: nesterov_async, clip: 0, adaptive_momentum: true}",
                             "scheme={type: nesterov_async, clip: 0, lr_correction_steps: 50}"}) {
    EXPECT_GT(testing::max_difference(base, testing::train(kMlp, {betas, scheme})), 1e-6) << scheme;
  }
  EXPECT_NE(testing::user_error([] {
              testing::train(kMlp, {"optimizer={type: sgd, lr: 0.1}", "scheme={type: nesterov_async, adaptive_momentum: true}"});
            }).find("adam, adamw or nadam"),
            std::string::npos);
}

TEST(NesterovAsync, PaperVariantMatchesO6) {
  // Two stages of the quadratic toy: every weight descends w^2 / 2 on its own, stage 0 with
  // the 1F1B delay tau = 1, stage 1 with none. gamma = 0.9, lr = 0.5, four steps.
  testing::ToyConfig c;
  c.init = {1, 1, 1, 1};
  c.lr = 0.5;
  c.quadratic = true;
  const testing::ToyResult r = testing::run_toy("{type: nesterov_async, variant: paper, gamma: 0.9}", c);
  // The oracle (docs/schemes.md, "Numbered oracles", tau = 1): w_0..w_4 = 1, 0.95, 0.855, 0.72425, 0.5681.
  // Step 3 by hand: d_2 = 0.9 (0.855 - 0.95) = -0.0855, the gradient at the look-ahead
  // w_1 + d_1 = 0.905, w_3 = 0.855 - 0.0855 - 0.05 * 0.905 = 0.72425.
  EXPECT_NEAR(r.weights[0], 0.5681, 1e-12);
  EXPECT_NEAR(r.weights[1], 0.5681, 1e-12);
  // tau = 0 (plain NAG): w = 1, 0.95, 0.85975, 0.73959875, 0.59988949375.
  EXPECT_NEAR(r.weights[2], 0.59988949375, 1e-12);
  EXPECT_NEAR(r.weights[3], 0.59988949375, 1e-12);
}

TEST(NesterovAsync, PaperVariantWithoutMomentumIsPipedreamStashing) {
  // gamma = 0: no look-ahead and an unscaled step, so the forwards' weights are exactly those
  // PipeDream stashes (w_{j - w_r}), with dropout on every stage.
  const std::string sgd = "optimizer={type: sgd, lr: 0.05}";
  const TensorDict pipedream = testing::train(kMlp, {sgd, "scheme={type: pipedream, variant: paper}"});
  const TensorDict paper = testing::train(kMlp, {sgd, "scheme={type: nesterov_async, variant: paper, gamma: 0}"});
  EXPECT_TRUE(testing::identical(pipedream, paper));
  // With momentum the two differ, and the threaded executor computes the same bits.
  const std::string scheme = "scheme={type: nesterov_async, variant: paper, gamma: 0.9}";
  const TensorDict sequential = testing::train(kMlp, {sgd, scheme});
  EXPECT_GT(testing::max_difference(pipedream, sequential), 1e-6);
  EXPECT_TRUE(testing::identical(sequential, testing::train(kMlp, {sgd, scheme, "run.executor=threaded"})));
}

TEST(NesterovAsync, PaperVariantOptionsAreChecked) {
  const std::string sgd = "optimizer={type: sgd, lr: 0.05}";
  EXPECT_NE(testing::user_error([&] { testing::train(kMlp, {sgd, "scheme={type: nesterov_async, variant: paper}"}); })
                .find("add gamma: 0.99"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] { testing::train(kMlp, {sgd, "scheme={type: nesterov_async, gamma: 0.9}"}); })
                .find("gamma belongs to variant paper"),
            std::string::npos);
  EXPECT_NE(testing::user_error([&] {
              testing::train(kMlp, {"optimizer={type: sgd, lr: 0.05, momentum: 0.9}",
                                    "scheme={type: nesterov_async, variant: paper, gamma: 0.9}"});
            }).find("must be plain SGD"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::nesterov_async_test
