// A run of an asynchronous scheme stopped after an epoch and resumed must end with the bytes
// of the uninterrupted run: whatever a policy carries across epochs (Gap-Aware's statistics,
// the Nesterov paper variant's previous weights, XPipe's micro-batch count, PipeMare's
// velocity) has to be in the checkpoint's policy state, and what predictors read from the
// optimizer (its last gradient) in the optimizer's.
#include <gtest/gtest.h>

#include "tests/support/helpers.h"

namespace pipelab::resume_state_test {
namespace {

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: async}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 3, batch_size: 16, seed: 5}
)";

void expect_resume_is_seamless(const std::vector<std::string>& overrides) {
  testing::TempDir dir;
  std::string label;
  for (const std::string& o : overrides) label += o + " ";
  Experiment straight = testing::experiment(kMlp, dir.file("straight"), overrides);
  Runner(straight, {false, true}).run();
  Experiment first = testing::experiment(kMlp, dir.file("resumed"), overrides);
  RunnerOptions stop{false, true};
  stop.stop_after = 1;
  ASSERT_EQ(Runner(first, stop).run().status, "stopped") << label;
  Experiment second = testing::experiment(kMlp, dir.file("resumed"), overrides);
  RunnerOptions resume{false, true};
  resume.resume = true;
  ASSERT_EQ(Runner(second, resume).run().status, "finished") << label;
  EXPECT_TRUE(testing::read_text(dir.file("straight/checkpoints/final.pt")) ==
              testing::read_text(dir.file("resumed/checkpoints/final.pt")))
      << label << "differs after a resume";
}

TEST(ResumeState, PredictorsReadTheLastGradientAfterAResume) {
  // The predictions read the optimizer's last gradient (SGD without momentum: its direction;
  // SpecTrain's reference variant: mu v + G), which a resume must restore with the buffers.
  expect_resume_is_seamless({"scheme={type: spectrain, variant: reference}"});
  expect_resume_is_seamless({"scheme={type: pipeoptim}", "optimizer.momentum=0"});
  expect_resume_is_seamless({"scheme={type: pipedream, gap_aware: all_except_last}", "optimizer.momentum=0"});
}

TEST(ResumeState, GapAwareStatisticsCarryOver) {
  expect_resume_is_seamless({"scheme={type: pipedream, gap_aware: all_except_last}"});
  expect_resume_is_seamless({"scheme={type: pipedream, gap_aware: all_except_last}",
                             "optimizer={type: adamw, lr: 0.01, weight_decay: 0.01}"});
  expect_resume_is_seamless({"scheme={type: ftpipe, predictor: aggmsnag, stash: true, gap_aware: all_except_last}"});
}

TEST(ResumeState, NewSchemesCarryTheirState) {
  expect_resume_is_seamless({"scheme={type: nesterov_async, variant: paper, gamma: 0.9}", "optimizer.momentum=0"});
  expect_resume_is_seamless({"scheme={type: xpipe, micro_batches: 4}", "optimizer={type: adam, lr: 0.01}"});
  expect_resume_is_seamless({"scheme={type: pipemare, rescheduling_steps: 10, correction: backward, velocity_decay: 0.5}"});
}

TEST(ResumeState, PaciAndMuonResumeBitForBit) {
  // 6 mini-batches an epoch and a = 4: each epoch ends with a partial group.
  expect_resume_is_seamless({"scheme={type: paci, accumulation: 4, backward: stash}"});
  expect_resume_is_seamless({"scheme={type: paci, accumulation: 2, backward: recompute}",
                             "optimizer={type: muon, lr: 0.02, fallback: {type: adamw, lr: 0.001, weight_decay: 0.01}}"});
  // SpecTrain predicts from the fallback's AdamW direction before the first step after the
  // resume: its bias correction reads the step count the resume restores to both.
  expect_resume_is_seamless({"scheme={type: spectrain}",
                             "optimizer={type: muon, lr: 0.02, fallback: {type: adamw, lr: 0.001, weight_decay: 0.01}}"});
}

TEST(ResumeState, BasisRotationResumesInTheMiddleOfARefreshPeriod) {
  // 6 mini-batches an epoch and a refresh every 4 steps: the stop after epoch 1 falls between
  // two refreshes, with the covariances, the bases and the permuted second moment to carry.
  expect_resume_is_seamless({"scheme={type: pipedream}",
                             "optimizer={type: basis_rotation, lr: 0.01, precondition_frequency: 4, rotate: [\"*\"]}"});
  expect_resume_is_seamless({"scheme={type: spectrain}",
                             "optimizer={type: basis_rotation, lr: 0.01, precondition_frequency: 4, rotate: [\"*\"], "
                             "approx_source: \"1st\", rotation_geometry: uni}"});
}

}  // namespace
}  // namespace pipelab::resume_state_test
