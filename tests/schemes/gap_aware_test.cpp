// Gap-Aware (core/weights/gap_aware.h) inside PipeDream's weight stashing, against its oracles
// in docs/schemes.md, "Numbered oracles" (SGD with momentum; Adam): one stage with delay 1, constant gradient 1.
// Adam with L2 decay and AdamW against hand-computed float64 values of Gap-Aware's Adam rule
// (docs/schemes.md, "Gap-Aware on pipedream").
#include <gtest/gtest.h>

#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::gap_aware_test {
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
  testing::ToyConfig nadam = constant_gradient(2);
  nadam.optimizer = "{type: nadam, lr: 0.001}";
  EXPECT_NE(testing::user_error([&] { testing::run_toy("{type: pipedream, gap_aware: all_except_last}", nadam); })
                .find("implemented for SGD, Adam and AdamW"),
            std::string::npos);
}

testing::ToyConfig adam_constant_gradient(const std::string& optimizer) {
  testing::ToyConfig c = constant_gradient(2);
  c.optimizer = optimizer;
  return c;
}

TEST(GapAware, AdamMatchesO14WithFtpipesRawNormaliser) {
  // The Adam oracle of docs/schemes.md, "Numbered oracles" (the fidelity flag for FTPipe's uncorrected
  // normaliser, docs/schemes.md, "Quirks": C = sqrt(S) + eps): eta = 1e-3, betas (0.9, 0.999), eps 1e-8.
  // Step 1: W_1 = 0.99900000001, S = 9.9999998e-10. Step 2: C = 3.16327763e-5, Gap = 0.001,
  // P = 32.6127798, g' = 0.0306628263, W_2 = 0.998307438836.
  const testing::ToyResult r =
      testing::run_toy("{type: pipedream, gap_aware: all_except_last, gap_aware_raw_normaliser: true}",
                       adam_constant_gradient("{type: adam, lr: 0.001}"));
  EXPECT_NEAR(r.weights[0], 0.998307438836, 1e-12);
  EXPECT_NEAR(r.weights[1], 0.998307438836, 1e-12);
  // The last stage: plain Adam, W_2 = 0.99800000002.
  EXPECT_NEAR(r.weights[2], 0.99800000002, 1e-12);
  EXPECT_NEAR(r.weights[3], 0.99800000002, 1e-12);
}

TEST(GapAware, AdamDefaultCorrectsTheBiasOfS) {
  // pipelab's bias-corrected normaliser (docs/schemes.md, "Quirks", FTPipe's Adam Gap-Aware),
  // C = sqrt(S / (1 - beta2^t)) + eps, by hand (float64):
  //   step 1: d_1 = m_hat / (sqrt(u_hat) + eps) = 1 / (1 + 1e-8), W_1 = 0.99900000001,
  //           S = (1 - 0.999) (1e-3 d_1)^2 = 9.9999998e-10;
  //   step 2 (t = 1): C = sqrt(S / 0.001) + 1e-8 = 1.00000999e-3, Gap = 0.00099999999,
  //           P = 1.99999000010, g' = 0.500002499988, m_2 = 0.140000249999,
  //           u_2 = 0.00124900250, m_hat = 0.736843421046, u_hat = 0.624813656825,
  //           W_2 = W_1 - 1e-3 m_hat / (sqrt(u_hat) + eps) = 0.998067819651307.
  const testing::ToyResult r = testing::run_toy("{type: pipedream, gap_aware: all_except_last}",
                                                adam_constant_gradient("{type: adam, lr: 0.001}"));
  EXPECT_NEAR(r.weights[0], 0.998067819651307, 1e-12);
  EXPECT_NEAR(r.weights[2], 0.99800000002, 1e-12);
  const auto& metrics = r.metrics[0];
  double last_penalty = 0;
  for (const StageMetric& m : metrics) {
    if (m.name == "gap_aware_penalty") last_penalty = m.value;
  }
  EXPECT_NEAR(last_penalty, 1.99999000010, 1e-9);
}

TEST(GapAware, AdamL2DividesTheDecayAndAdamWScalesTheWeights) {
  // lambda = 0.1, the same steps (float64 by hand, the same recurrences as above):
  // Adam + L2 feeds (g + lambda W_1) / P: W_2 = 0.998067832953439 (no GA: 0.998000002388929).
  const testing::ToyResult l2 = testing::run_toy("{type: pipedream, gap_aware: all_except_last}",
                                                 adam_constant_gradient("{type: adam, lr: 0.001, weight_decay: 0.1}"));
  EXPECT_NEAR(l2.weights[0], 0.998067832953439, 1e-12);
  EXPECT_NEAR(l2.weights[2], 0.998000002388929, 1e-12);
  // AdamW: W_1 <- W_1 (1 - lambda lr (1 - P) / P), then AdamW's (1 - lr lambda) and the step
  // with g / P: W_2 = 0.997927454025939 (no GA: 0.997800110019999).
  const testing::ToyResult w = testing::run_toy("{type: pipedream, gap_aware: all_except_last}",
                                                adam_constant_gradient("{type: adamw, lr: 0.001, weight_decay: 0.1}"));
  EXPECT_NEAR(w.weights[0], 0.997927454025939, 1e-12);
  EXPECT_NEAR(w.weights[2], 0.997800110019999, 1e-12);
}

}  // namespace
}  // namespace pipelab::gap_aware_test
