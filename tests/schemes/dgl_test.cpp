// Decoupled greedy learning (synchronous, docs/schemes.md §3.20, F55): the O22 oracle, its
// identity with interlocking's local mode, and what it sends.
#include <gtest/gtest.h>

#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab {
namespace {

testing::ToyConfig o22() {
  testing::ToyConfig c;
  c.init = {1, 0.5, 2, -0.8};  // (a0, c0), (a1, c1)
  c.greedy_heads = true;
  return c;
}

TEST(Dgl, SynchronousOracleO22) {
  // Two scalar modules h_k = a_k h_{k-1} with auxiliary z = c_k h_k and loss (z - t)^2 / 2,
  // SGD 0.1, the four samples of §5.4. Module 1 reads h computed with module 0's pre-step a0.
  const std::vector<double> want{0.803704956, 0.132065394, 1.787263276, -0.105750879};
  for (const char* scheme : {"{type: dgl}", "{type: interlocking, mode: local}"}) {
    const testing::ToyResult r = testing::run_toy(scheme, o22());
    ASSERT_EQ(r.weights.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.weights[i], want[i], 1e-9) << scheme << " weight " << i;
  }
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 160, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 2]}
scheme:    {type: dgl}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 2}
)";

TEST(Dgl, SynchronousIsInterlockingLocalMode) {
  // The same heads (fc8_fc), the same initial weights: identical parameters after two epochs,
  // heads included, and different from end-to-end training.
  for (const char* dtype : {"float32", "float64"}) {
    const std::vector<std::string> base{std::string("run.dtype=") + dtype};
    const auto with = [&](const std::string& scheme) {
      std::vector<std::string> o = base;
      o.push_back("scheme=" + scheme);
      return testing::train(kMlp, o);
    };
    const TensorDict dgl = with("{type: dgl, heads: fc8_fc}");
    EXPECT_TRUE(testing::identical(dgl, with("{type: interlocking, mode: local, heads: fc8_fc}"))) << dtype;
    EXPECT_GT(testing::max_difference(dgl, with("{type: interlocking, mode: global}")), 1e-3) << dtype;
  }
}

TEST(Dgl, NothingGoesBackAndHeadsAreChecked) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("run"), {"run.epochs=1"});
  Runner runner(e, {false, true});
  const RunSummary s = runner.run();
  EXPECT_EQ(s.history.back().bytes_forward_per_step, 3 * 16 * 24 * 4);
  EXPECT_EQ(s.history.back().bytes_backward_per_step, 0.0);
  const std::string bad = testing::user_error([] { testing::experiment(kMlp, "", {"scheme={type: dgl, heads: fc8_relu}"}); });
  EXPECT_NE(bad.find("scheme.heads"), std::string::npos) << bad;
  EXPECT_NE(bad.find("'relu' in 'fc8_relu' is not a known token"), std::string::npos) << bad;
}

}  // namespace
}  // namespace pipelab
