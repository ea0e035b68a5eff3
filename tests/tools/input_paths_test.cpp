// Relative paths in an experiment: what it reads resolves against the file's folder (from any
// current directory), --set values against the current directory, and a sweep checks every
// file its cells name before anything runs or is written.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/experiment/experiment.h"
#include "core/experiment/input_paths.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/sweep/plan.h"

namespace pipelab::input_paths_test {
namespace {

const char* kExperiment = R"(
model:     {type: mlp, sizes: [8, 16, 4]}
dataset:   {type: synthetic, samples: 64, shape: [8], classes: 4}
partition: {stages: 2}
scheme:    {type: custom, file: 1f1b.sched}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16}
)";

const char* kSchedule = "d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U\n";

// An experiment written into another folder (`pipelab plan --emit`) names the same files.
TEST(InputPaths, RebasedToAnotherFolderTheyNameTheSameFiles) {
  YAML::Node root = YAML::Load("{dataset: {type: tensors, path: data/x.pt}, init: {from: /abs/w.pt}}");
  rebase_input_paths(root, "exp", "exp/out");
  EXPECT_EQ(root["dataset"]["path"].as<std::string>(), "../data/x.pt");
  EXPECT_EQ(root["init"]["from"].as<std::string>(), "/abs/w.pt");
  rebase_input_paths(root, "exp/out", "exp/out");
  EXPECT_EQ(root["dataset"]["path"].as<std::string>(), "../data/x.pt");
}

TEST(InputPaths, ReadFromTheExperimentsFolderAndSetValuesFromTheCurrentOne) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("exp"));
  testing::write_text(dir.file("exp/e.yaml"), kExperiment);
  testing::write_text(dir.file("exp/1f1b.sched"), kSchedule);
  // The current directory is elsewhere (the test binary's); the file's own folder counts.
  const Experiment e = Experiment::load(dir.file("exp/e.yaml"));
  EXPECT_EQ(e.scheme->resolved()["file"].as<std::string>(), dir.file("exp/1f1b.sched"));
  // A --set value is the shell's: relative to the current directory.
  const Experiment set = Experiment::load(dir.file("exp/e.yaml"), {"scheme.file=1f1b.sched"});
  EXPECT_EQ(set.scheme->resolved()["file"].as<std::string>(), "1f1b.sched");
  // Absolute paths stay as written.
  const Experiment abs = Experiment::load(dir.file("exp/e.yaml"), {"scheme.file=" + dir.file("exp/1f1b.sched")});
  EXPECT_EQ(abs.scheme->resolved()["file"].as<std::string>(), dir.file("exp/1f1b.sched"));
}

TEST(InputPaths, ASweepChecksEveryCellsFilesBeforeAnythingRuns) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("exp"));
  testing::write_text(dir.file("exp/1f1b.sched"), kSchedule);
  const std::string sweep = std::string(kExperiment) + "sweep:\n  output: " + dir.file("out") +
                            "\n  grid:\n    scheme.file: [1f1b.sched, missing.sched]\n";
  testing::write_text(dir.file("exp/s.yaml"), sweep);
  const std::string e = testing::user_error([&] { tools::plan_sweep(dir.file("exp/s.yaml"), {}); });
  EXPECT_NE(e.find("scheme.file: " + dir.file("exp/missing.sched")), std::string::npos) << e;
  EXPECT_NE(e.find("nothing was run or written"), std::string::npos) << e;
  const auto [code, out] = testing::pipelab("sweep " + dir.file("exp/s.yaml"));
  EXPECT_EQ(code, 2) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out"))) << out;
  // Without the bad cell the copies read the schedule beside the sweep file.
  testing::write_text(dir.file("exp/missing.sched"), kSchedule);
  const tools::SweepPlan plan = tools::plan_sweep(dir.file("exp/s.yaml"), {});
  ASSERT_EQ(plan.runs.size(), 2u);
  EXPECT_NE(plan.runs[0].experiment.find(dir.file("exp/1f1b.sched")), std::string::npos) << plan.runs[0].experiment;
}

}  // namespace
}  // namespace pipelab::input_paths_test
