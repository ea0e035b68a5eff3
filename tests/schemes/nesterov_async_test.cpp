// The Nesterov asynchronous scheme (schemes/nesterov_async.cpp) as AsyncPP's code runs it:
// adaptive momentum against oracle O7, one stage equal to single-device NAdam, and with AdamW
// exactly PipeDream's weight stashing with the ring reset at every epoch (§8.6's
// equivalences); clipping and the LR correction change the run.
#include <gtest/gtest.h>

#include "schemes/nesterov_async.h"
#include "tests/support/helpers.h"

namespace pipelab {
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

}  // namespace
}  // namespace pipelab
