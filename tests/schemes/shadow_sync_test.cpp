// run.shadow: sync (core/feed/shadow_sync.h). A synchronous scheme must match its shadow
// exactly, at every update of every stage (float64, dropout on): that holds the bookkeeping
// (micro-batches per update, versions, dropout states, loss shares) to the definition. An
// asynchronous run must be bitwise the same with the shadow on, and its measurements must
// show the staleness where the schedule puts it.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tests/support/helpers.h"

namespace pipelab::shadow_sync_test {
namespace {

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: async}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3, dtype: float64}
)";

struct Row {
  int64_t step;
  int stage;
  double value;
};

/// The rows of metrics/stages.csv named `name`.
std::vector<Row> rows(const std::string& run, const std::string& name) {
  std::istringstream in(testing::read_text(run + "/metrics/stages.csv"));
  std::string line;
  std::getline(in, line);
  std::vector<Row> out;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string epoch, step, stage, n, value;
    std::getline(f, epoch, ',');
    std::getline(f, step, ',');
    std::getline(f, stage, ',');
    std::getline(f, n, ',');
    std::getline(f, value, ',');
    if (n == name) out.push_back({std::stoll(step), std::stoi(stage), std::stod(value)});
  }
  return out;
}

RunSummary run(const std::string& out, const std::vector<std::string>& overrides) {
  Experiment e = testing::experiment(kMlp, out, overrides);
  RunnerOptions options;
  options.quiet = true;
  Runner runner(e, options);
  return runner.run();
}

TEST(ShadowSync, SynchronousSchemesEqualTheirShadowAtEveryUpdate) {
  for (const char* scheme : {"scheme={type: gpipe, chunks: 4}", "scheme={type: pipedream_flush, chunks: 4}",
                             "scheme={type: zb_h1, chunks: 4}", "scheme={type: naive}"}) {
    testing::TempDir dir;
    run(dir.file("run"), {scheme, "run.shadow=sync"});
    // 96 / 16 = 6 updates per epoch, 2 epochs, 4 stages.
    const std::vector<Row> cosine = rows(dir.file("run"), "shadow_cosine");
    ASSERT_EQ(cosine.size(), 48u) << scheme;
    for (const Row& r : cosine) EXPECT_NEAR(r.value, 1.0, 1e-12) << scheme << " stage " << r.stage << " step " << r.step;
    for (const Row& r : rows(dir.file("run"), "shadow_gradient_difference")) EXPECT_LT(r.value, 1e-12) << scheme;
    for (const char* name : {"shadow_forward_distance", "shadow_backward_distance"}) {
      for (const Row& r : rows(dir.file("run"), name)) EXPECT_EQ(r.value, 0.0) << scheme << " " << name;
    }
  }
}

TEST(ShadowSync, AsynchronousRunsAreBitwiseUnchangedAndMeasured) {
  for (const char* scheme : {"scheme={type: async}", "scheme={type: pipedream}", "scheme={type: spectrain}",
                             "scheme={type: pipedream_2bw, micro_batches: 2, flush: never}",
                             "scheme={type: paci, accumulation: 2, backward: stash}"}) {
    for (const char* executor : {"run.executor=sequential", "run.executor=threaded"}) {
      const TensorDict off = testing::train(kMlp, {scheme, executor, "run.dtype=float32"});
      const TensorDict on = testing::train(kMlp, {scheme, executor, "run.dtype=float32", "run.shadow=sync"});
      EXPECT_TRUE(testing::identical(off, on)) << scheme << " " << executor;
    }
  }
  testing::TempDir dir;
  const RunSummary s = run(dir.file("run"), {"scheme={type: async}", "run.shadow=sync"});
  std::map<int, double> smallest;
  for (const Row& r : rows(dir.file("run"), "shadow_cosine")) {
    // The first update of an epoch: every stage still holds the version every forward read.
    if (r.step % 6 == 1) EXPECT_NEAR(r.value, 1.0, 1e-12) << "stage " << r.stage << " step " << r.step;
    smallest.try_emplace(r.stage, 1.0);
    smallest[r.stage] = std::min(smallest[r.stage], r.value);
  }
  // Stale forwards upstream make every stage's gradient differ (the last stage's inputs too).
  for (int r = 0; r < 4; ++r) EXPECT_LT(smallest[r], 1.0 - 1e-9) << "stage " << r;
  // async: forwards read the weights of w_r updates ago, backwards the current ones.
  for (const Row& r : rows(dir.file("run"), "shadow_forward_distance")) {
    if (r.stage == 3 || r.step % 6 == 1) EXPECT_EQ(r.value, 0.0);
    if (r.stage == 0 && r.step % 6 == 4) EXPECT_GT(r.value, 0.0);
  }
  for (const Row& r : rows(dir.file("run"), "shadow_backward_distance")) EXPECT_EQ(r.value, 0.0);
  // The end-of-run summary has the per-stage means.
  ASSERT_EQ(s.stage_means.size(), 4u);
  EXPECT_TRUE(s.stage_means[0].count("shadow_cosine"));
  EXPECT_LT(s.stage_means[0].at("shadow_cosine"), 1.0);
}

TEST(ShadowSync, RefusesWhatItCannotMirror) {
  EXPECT_NE(testing::user_error([] {
              testing::train(kMlp, {"scheme={type: dp, replicas: 2}", "run.shadow=sync"});
            }).find("run.shadow"),
            std::string::npos);
  EXPECT_NE(testing::user_error([] { testing::train(kMlp, {"run.shadow=maybe"}); }).find("off, sync"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::shadow_sync_test
