// Every experiment file the repository ships is valid: a file with a `sweep:` section plans
// (as `pipelab sweep FILE --dry-run` does) and every one of its cells parses; any other file
// parses as one experiment. Nothing is trained and no dataset is read.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/config/yaml_file.h"
#include "tests/support/helpers.h"
#include "tools/sweep/plan.h"

namespace pipelab::experiments_test {
namespace {

TEST(Experiments, EveryShippedFileParsesAndPlans) {
  int files = 0, sweeps = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(PIPELAB_SOURCE_DIR) + "/experiments")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string file = entry.path().string();
    ++files;
    try {
      if (testing::read_text(file).find("\nsweep:") != std::string::npos) {
        ++sweeps;
        const tools::SweepPlan plan = tools::plan_sweep(file, {});
        EXPECT_FALSE(plan.runs.empty()) << file;
        for (const tools::PlannedRun& run : plan.runs) Experiment::parse(run.experiment, file + " cell " + run.id);
      } else {
        Experiment::load(file);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << file << ": " << e.what();
    }
  }
  EXPECT_GE(files, 20);
  EXPECT_GE(sweeps, 15);
}

/// The experiment trees `file` stands for with `sets`: its sweep's cells, or itself; each
/// checked as an experiment.
std::vector<YAML::Node> experiments_of(const std::string& file, const std::vector<std::string>& sets) {
  std::vector<YAML::Node> out;
  if (testing::read_text(file).find("\nsweep:") == std::string::npos) {
    Experiment::load(file, sets);
    YAML::Node root = load_yaml_file(file);
    ConfigSource source(file);
    apply_overrides(root, sets, source);
    out.push_back(root);
    return out;
  }
  for (const tools::PlannedRun& run : tools::plan_sweep(file, sets).runs) {
    Experiment::parse(run.experiment, file + " cell " + run.id);
    out.push_back(YAML::Load(run.experiment));
  }
  return out;
}

TEST(Experiments, EverySeedHasAMiniatureThatTrainsBrieflyOnTheCpu) {
  // `--preset cpu-mini` (docs/sweeps.md): every cell on the CPU, one epoch of at most 512
  // examples, written apart from the full runs, whatever the cell's own entries say.
  int files = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(PIPELAB_SOURCE_DIR) + "/experiments/seeds")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string file = entry.path().string();
    ++files;
    try {
      for (const YAML::Node& e : experiments_of(file, {"preset=cpu-mini"})) {
        EXPECT_EQ(e["run"]["epochs"].as<int>(), 1) << file;
        EXPECT_EQ(e["run"]["devices"].as<std::vector<std::string>>(), std::vector<std::string>{"cpu"}) << file;
        EXPECT_EQ(e["run"]["output"].as<std::string>().rfind("runs/mini/", 0), 0u) << file;
        const YAML::Node d = e["dataset"];
        const bool small = (d["limit"] && d["limit"].as<int>() <= 512) ||
                           (d["type"].as<std::string>() == "synthetic" && d["samples"].as<int>() <= 512);
        EXPECT_TRUE(small) << file << ": trains on the whole dataset";
        const int examples = d["limit"] ? d["limit"].as<int>() : d["samples"].as<int>();
        EXPECT_LE(e["run"]["batch_size"].as<int>(), examples) << file << ": not one batch";
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << file << ": " << e.what();
    }
  }
  EXPECT_EQ(files, 14);
}

}  // namespace
}  // namespace pipelab::experiments_test
