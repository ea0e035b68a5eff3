// Every experiment file the repository ships is valid: a file with a `sweep:` section plans
// (as `pipelab sweep FILE --dry-run` does) and every one of its cells parses; any other file
// parses as one experiment. Nothing is trained and no dataset is read.
#include <gtest/gtest.h>

#include <filesystem>

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

}  // namespace
}  // namespace pipelab::experiments_test
