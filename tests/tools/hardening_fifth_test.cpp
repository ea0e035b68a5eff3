// The fifth hostile-input round (the planner's and presets' surfaces): one test per class of
// finding that the command line shows. Flags that name nothing (an empty --preset, an empty
// or unknown --schemes entry) and ranks out of range are refused with their fix, exit 2; a
// scheme the planner can make nothing of is named with its reason. (The preset merge, the
// null keys, the recompute refusal, the overwrite and --emit's overwrite have tests beside
// their code: preset_test, stage_recompute_test, config_test, plan_test.)
#include <gtest/gtest.h>

#include <filesystem>

#include "core/run/run_recorder.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::hardening_fifth_test {
namespace {

using testing::pipelab;

const char* kExperiment = R"(
model:     {type: mlp, sizes: [12, 32, 32, 4]}
dataset:   {type: synthetic, samples: 128, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 1, threads: 1, progress: false}
presets:
  mini: {run.epochs: 1}
)";

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(HardeningFifth, AnEmptyPresetNameIsAMistake) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  for (const std::string command : {"run", "describe", "plan --devices 2 --device-flops 1"}) {
    const auto [code, out] = pipelab(fmt::format("{} {} --preset '' --set run.output={}", command, dir.file("e.yaml"),
                                                 dir.file("run")));
    EXPECT_EQ(code, 2) << command << "\n" << out;
    EXPECT_HAS(out, "--preset: the name is empty. Fix:");
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("run")));
}

TEST(HardeningFifth, RanksOutOfRangeSayWhatTheyMayBe) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [minus, below] = pipelab(fmt::format("run {} --rank -1 --world-size 2", dir.file("e.yaml")));
  EXPECT_EQ(minus, 2) << below;
  EXPECT_HAS(below, "--rank -1 of --world-size 2: ranks are 0 .. 1. Fix: give each process a rank from 0 to 1");
  const auto [zero, none] = pipelab(fmt::format("run {} --rank 0 --world-size 0", dir.file("e.yaml")));
  EXPECT_EQ(zero, 2) << none;
  EXPECT_HAS(none, "--world-size 0: a run has at least one process. Fix:");
}

TEST(HardeningFifth, PlanNamesEverySchemeItCannotPlanAndWhy) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string plan = fmt::format("plan {} --devices 2 --device-flops 1 ", dir.file("e.yaml"));
  // A typo: refused before any search, the closest name first.
  auto [code, out] = pipelab(plan + "--schemes gpip");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--schemes: no scheme is registered as 'gpip'. Fix: use one of: gpipe");
  std::tie(code, out) = pipelab(plan + "--schemes ''");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--schemes: an empty list");
  // Registered, but nothing it can make here: the scheme by name, and the run plan's reason.
  std::tie(code, out) = pipelab(plan + "--schemes seq1f1b");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--schemes seq1f1b: the scheme cannot run this experiment:");
  EXPECT_HAS(out, "seq1f1b: ");
  EXPECT_HAS(out, "scheme seq1f1b computes each micro-batch in");
  std::tie(code, out) = pipelab(plan + "--schemes custom --explain");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "custom (no candidate at all): ");
}

// A plan is one the run takes: 32 devices for a mini-batch of 16 yield no 32-replica plan,
// and the emitted winner runs.
TEST(HardeningFifth, PlanOffersOnlyWhatTheRunTakes) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, out] = pipelab(fmt::format("plan {} --devices 32 --device-flops 1 --schemes dp,single --allow-idle "
                                               "--emit {}",
                                               dir.file("e.yaml"), dir.file("best.yaml")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("replicas=32"), std::string::npos) << out;
  const auto [rc, run] =
      pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("best.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 0) << run;
}

}  // namespace
}  // namespace pipelab::hardening_fifth_test

namespace pipelab::hardening_fifth_test {
namespace {

// A run whose steps waited for their batches says so in its summary, with the knob and its
// value (a GPU run with one loader worker was loader-bound: docs/gpu.md, "Sixth session").
TEST(HardeningFifth, TheSummaryNamesALoaderThatCannotKeepUp) {
  const Experiment e = testing::experiment(kExperiment, "", {"run.loader.workers=2"});
  RunSummary s;
  s.history.emplace_back();
  s.history.back().epoch = 1;
  s.history.back().data_wait_fraction = 0.25;
  EXPECT_HAS(format_summary(e, s), "waited for their batches 25% of the last epoch: raise run.loader.workers (now 2)");
  s.history.back().data_wait_fraction = 0.02;
  EXPECT_EQ(format_summary(e, s).find("waited for their batches"), std::string::npos);
}

}  // namespace
}  // namespace pipelab::hardening_fifth_test
