// Pipelined Backpropagation (schemes/pipelined_backprop.cpp; docs/schemes.md, "pipelined_backprop"): the derived
// oracle of docs/schemes.md, "Numbered oracles" for every combination of its UNVERIFIED options (f(w) = w^2 / 2 with
// each gradient taken at the forward's weights, tau = 2), its equivalences (tau = 0 is SGD with momentum;
// without momentum spike compensation changes nothing; one stage is `single`), and the
// refusal of spike compensation without SGD momentum.
#include <gtest/gtest.h>

#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::pipelined_backprop_test {
namespace {

/// Stage 0's and stage 1's weights after `updates` updates of the two-stage quadratic toy
/// (per-tick delays: tau_0 = 2, tau_1 = 0), W_0 = 1, lr 0.1, momentum 0.9.
std::pair<double, double> after(const std::string& options, int updates) {
  testing::ToyConfig c;
  c.init = {1, 1, 1, 1};
  c.lr = 0.1;
  c.momentum = 0.9;
  c.quadratic_at_forward = true;
  c.examples = updates;
  const testing::ToyResult r = testing::run_toy("{type: pipelined_backprop" + options + "}", c);
  EXPECT_EQ(r.weights[0], r.weights[1]);  // both of a stage's weights follow one sequence
  return {r.weights[0], r.weights[2]};
}

TEST(PipelinedBackprop, TheDerivedOracle) {
  // The oracle (docs/schemes.md, "Numbered oracles"): W_1 .. W_6 with tau = 2 (stage 0), and SGD with momentum
  // (tau = 0: stage 1).
  const std::vector<std::pair<std::string, std::vector<double>>> runs{
      {"", {0.9, 0.71, 0.439, 0.1051, -0.26641, -0.644669}},
      {", spike_compensation: momentum_power", {0.9, 0.629, 0.21949, -0.221969, -0.6358411, -0.96024878}},
      {", prediction: velocity", {0.9, 0.71, 0.439, 0.1251, -0.19041, -0.464069}},
      {", spike_compensation: momentum_power, prediction: velocity",
       {0.9, 0.629, 0.21949, -0.167769, -0.4640811, -0.60078278}},
  };
  const std::vector<double> sgdm{0.9, 0.72, 0.486, 0.2268, -0.02916, -0.256608};
  for (const auto& [options, expected] : runs) {
    for (int k = 1; k <= 6; ++k) {
      const auto [delayed, fresh] = after(options, k);
      EXPECT_NEAR(delayed, expected[static_cast<size_t>(k - 1)], 1e-12) << options << " W_" << k;
      // Equivalence 1: without delay every option is SGD with momentum.
      EXPECT_NEAR(fresh, sgdm[static_cast<size_t>(k - 1)], 1e-12) << options << " W_" << k;
    }
  }
  // The weight-difference prediction is the velocity one without spike compensation
  // (docs/schemes.md, "pipelined_backprop").
  EXPECT_NEAR(after(", prediction: weight_difference", 6).first, -0.464069, 1e-12);
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [12], classes: 4}
partition: {stages: 3}
scheme:    {type: pipelined_backprop}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 2, batch_size: 1, seed: 2, threads: 1, dtype: float64}
)";

TEST(PipelinedBackprop, Equivalences) {
  // Without momentum spike compensation's step is lr g: the same bits (equivalence 2).
  EXPECT_TRUE(testing::identical(testing::train(kMlp),
                                 testing::train(kMlp, {"scheme={type: pipelined_backprop, spike_compensation: "
                                                       "momentum_power}"})));
  // Without spike compensation or prediction it is asynchronous 1F1B at the tick's delays;
  // at one_f_one_b timing exactly `async` (equivalence 3).
  EXPECT_TRUE(testing::identical(testing::train(kMlp, {"scheme={type: async}"}),
                                 testing::train(kMlp, {"scheme={type: pipelined_backprop, timing: one_f_one_b}"})));
  // One stage: no delay, `single` (equivalence 1), with every option.
  const std::vector<std::string> one{"partition.stages=1", "optimizer={type: sgd, lr: 0.05, momentum: 0.9}"};
  std::vector<std::string> pb = one, single = one;
  pb.push_back("scheme={type: pipelined_backprop, spike_compensation: momentum_power, prediction: velocity}");
  single.push_back("scheme={type: single}");
  EXPECT_LT(testing::max_difference(testing::train(kMlp, pb), testing::train(kMlp, single)), 1e-12);
  // Spike compensation is written for SGD with momentum.
  EXPECT_NE(testing::user_error([] {
              testing::train(kMlp, {"optimizer={type: adam, lr: 0.001}",
                                    "scheme={type: pipelined_backprop, spike_compensation: momentum_power}"});
            }).find("scheme.spike_compensation"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::pipelined_backprop_test
