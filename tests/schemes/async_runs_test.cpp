// Asynchronous schemes in whole runs: D = 1 equals single-device training exactly,
// PipeDream's version bookkeeping, exact predictions under a constant gradient, flush: never,
// and reproducibility.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "tests/schemes/toy_pipeline.h"
#include "tests/support/helpers.h"

namespace pipelab::async_runs_test {
namespace {

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 192, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 1}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 2, batch_size: 16, seed: 5}
)";

TEST(AsyncRuns, OneStageEqualsSingleExactly) {
  const TensorDict single = testing::train(kMlp);
  for (const char* scheme : {"{type: async}", "{type: pipedream}", "{type: pipedream, variant: reference}",
                             "{type: pipedream, vertical_sync: true}", "{type: spectrain}",
                             "{type: spectrain, variant: reference}", "{type: spectrain, version: 2}",
                             "{type: spectrain, version: 2, variant: reference}", "{type: pipeoptim}",
                             "{type: pipeoptim, flush: never}"}) {
    EXPECT_TRUE(testing::identical(single, testing::train(kMlp, {std::string("scheme=") + scheme}))) << scheme;
  }
  // The released PipeOptim predicts one step even at D = 1 (s = D - r), so it differs (docs/schemes.md,
  // "Equivalences").
  EXPECT_FALSE(testing::identical(single, testing::train(kMlp, {"scheme={type: pipeoptim, variant: reference}"})));
}

/// Mean of a metric at a stage from the toy's records, over updates with step >= from.
std::map<int64_t, double> metric(const testing::ToyResult& r, int stage, const std::string& name) {
  std::map<int64_t, double> out;
  for (const StageMetric& m : r.metrics[static_cast<size_t>(stage)]) {
    if (m.name == name) out[m.step] = m.value;
  }
  return out;
}

TEST(AsyncRuns, PipedreamVersionsPerStage) {
  // Four stages, two epochs of twelve mini-batches.
  testing::ToyConfig config{{1, 0.5, 1, 0.5, 1, 0.5, 1, 0.5}, 0.0, 0.0, 0.01};
  config.epochs = 2;
  config.examples = 12;
  const auto r = testing::run_toy("{type: pipedream}", config);
  for (int stage = 0; stage < 4; ++stage) {
    const int w = 3 - stage;
    const auto fwd = metric(r, stage, "forward_gap"), bwd = metric(r, stage, "backward_gap");
    ASSERT_EQ(fwd.size(), 24u);
    for (const auto& [step, gap] : fwd) {
      // The backward reads exactly the version its forward used ...
      EXPECT_EQ(bwd.at(step), gap) << "stage " << stage << " step " << step;
      // ... w_r versions behind the update, after the epoch's warm-up (the epoch start's before).
      EXPECT_EQ(gap, std::min<int64_t>(step % 12, w)) << "stage " << stage << " step " << step;
    }
    // In steady state (after the update of mini-batch 7) stage r holds D - r versions.
    EXPECT_EQ(metric(r, stage, "stored_versions").at(8), 4 - stage) << stage;
  }
}

TEST(AsyncRuns, VerticalSyncUsesTheFirstStagesVersionEverywhere) {
  testing::ToyConfig config{{1, 0.5, 1, 0.5, 1, 0.5, 1, 0.5}, 0.0, 0.0, 0.01};
  const auto r = testing::run_toy("{type: pipedream, vertical_sync: true}", config);
  // Mini-batch j uses the first stage's version max(0, j - 3) on every stage, so at the
  // update of mini-batch j (live version j) the forward gap is min(j, D - 1) everywhere.
  for (int stage = 0; stage < 4; ++stage) {
    for (const auto& [step, gap] : metric(r, stage, "forward_gap")) EXPECT_EQ(gap, std::min<int64_t>(step, 3)) << stage;
  }
  // Stage 3 keeps versions back to the first stage's: D of them while it works on a
  // mini-batch, plus the newest between an update and the next forward (which may still
  // ask for the oldest during the warm-up).
  double most = 0;
  for (const auto& [step, n] : metric(r, 3, "stored_versions")) most = std::max(most, n);
  EXPECT_GE(most, 4);
  EXPECT_LE(most, 5);
}

TEST(AsyncRuns, ConstantGradientPredictionsAreExact) {
  // y = x + w and a mean loss: every weight's gradient is the same constant each step, so
  // SGD without momentum and Adam move at a constant rate, and the paper variant's
  // prediction of the version the backward updates is exactly right.
  testing::ToyConfig config{{0, 0, 0, 0, 0, 0}};
  config.constant_gradient = true;
  config.epochs = 3;
  for (const char* optimizer : {"{type: sgd, lr: 0.1}", "{type: adam, lr: 0.01}"}) {
    config.optimizer = optimizer;
    const auto r = testing::run_toy("{type: pipeoptim}", config);
    int measured = 0;
    for (int stage = 0; stage < 2; ++stage) {  // the last stage does not predict (s = 0)
      for (const auto& [step, error] : metric(r, stage, "prediction_error")) {
        EXPECT_NEAR(error, 0.0, 1e-9) << optimizer << " stage " << stage << " step " << step;
        ++measured;
      }
    }
    EXPECT_GT(measured, 2) << optimizer;
    // SpecTrain v1 targets floor(r/2) versions past it, so there the error is not zero.
  }
}

TEST(AsyncRuns, FlushNeverRunsOnePipelineAcrossEpochs) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("run"),
                                     {"partition.stages=3", "scheme={type: pipedream, flush: never}"});
  Runner runner(e, {false, true});
  const RunSummary s = runner.run();
  ASSERT_EQ(s.history.size(), 2u);
  EXPECT_GT(s.history[1].test_acc, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/checkpoints/flushless")));
  // It differs from the flushed pipeline: epoch 2's warm-up overlapped epoch 1's drain.
  Experiment flushed = testing::experiment(kMlp, dir.file("flushed"), {"partition.stages=3", "scheme={type: pipedream}"});
  Runner(flushed, {false, true}).run();
  EXPECT_FALSE(testing::identical(load_tensor_dict(dir.file("run/checkpoints/final.pt")),
                                  load_tensor_dict(dir.file("flushed/checkpoints/final.pt"))));
  // The evaluation of the last epoch used the final weights: its test accuracy is the final model's.
  EXPECT_NE(testing::read_text(dir.file("run/metrics/stages.csv")).find("forward_gap"), std::string::npos);
}

TEST(AsyncRuns, TwoRunsSameBytesAndAStalenessSummary) {
  testing::TempDir dir;
  for (const char* name : {"a", "b"}) {
    Experiment e = testing::experiment(kMlp, dir.file(name), {"partition.stages=4", "scheme={type: spectrain, version: 1}"});
    Runner(e, {false, true}).run();
  }
  for (const char* file : {"metrics/steps.csv", "metrics/stages.csv", "checkpoints/final.pt"}) {
    EXPECT_TRUE(testing::read_text(dir.file(std::string("a/") + file)) == testing::read_text(dir.file(std::string("b/") + file)))
        << file;
  }
  const std::string summary = testing::read_text(dir.file("a/summary.json"));
  EXPECT_NE(summary.find("\"forward_gap\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"prediction_error\""), std::string::npos) << summary;
  const std::string log = testing::read_text(dir.file("a/log.txt"));
  EXPECT_NE(log.find("forward gap"), std::string::npos) << log;
  // SpecTrain's predicted weights stand ahead of the update: the summary says what a
  // negative gap means.
  EXPECT_NE(log.find("< 0 predicted weights ahead of that update"), std::string::npos) << log;
}

}  // namespace
}  // namespace pipelab::async_runs_test
