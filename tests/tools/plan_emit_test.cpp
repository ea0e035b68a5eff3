// `pipelab plan --emit` writes a file `pipelab run` runs: the experiment the plan was made for
// (--set applied), a data section the model takes (a language model's synthetic tokens), and a
// `cpu-mini` preset that runs the same plan here in two steps. Each planned model kind's
// emitted file runs in miniature; the baselines and the verdict are printed beside the table.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::plan_emit_test {
namespace {

struct Case {
  std::string name, file, sets;
};

TEST(PlanEmit, EveryPlannedModelKindsEmittedFileRunsInMiniature) {
  const std::string dir = PIPELAB_EXPERIMENTS_DIR;
  const std::vector<Case> cases = {
      {"transformer lm", dir + "/plan/lm_h100.yaml", "--set model.layers=4"},
      {"mlp", dir + "/quickstart.yaml", ""},
      {"resnet", dir + "/plan/validate_cnn.yaml", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    testing::TempDir tmp;
    const auto [code, out] = testing::pipelab(fmt::format("plan {} --devices 4 --cluster h100_sxm {} --emit {}", c.file,
                                                          c.sets, tmp.file("best.yaml")));
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find("profile from shapes"), std::string::npos) << out;
    EXPECT_TRUE(out.find("\ndon't pipeline: ") != std::string::npos || out.find("\npipeline: ") != std::string::npos)
        << out;
    const std::string emitted = testing::read_text(tmp.file("best.yaml"));
    EXPECT_NE(emitted.find("cpu-mini"), std::string::npos) << emitted;
    if (!c.sets.empty()) EXPECT_NE(emitted.find("layers: 4"), std::string::npos) << emitted;
    const auto [run_code, run_out] = testing::pipelab(
        fmt::format("run {} --preset cpu-mini --set run.output={}", tmp.file("best.yaml"), tmp.file("run")));
    EXPECT_EQ(run_code, 0) << emitted << "\n" << run_out;
  }
}

TEST(PlanEmit, TheBaselinesShowEvenWhenTheyDoNotRank) {
  // The quickstart's MLP on 8 devices: one device is not a candidate without --allow-idle, but
  // its row is shown, and the latency-bound verdict says not to pipeline.
  const auto [code, out] =
      testing::pipelab(std::string("plan ") + PIPELAB_EXPERIMENTS_DIR + "/quickstart.yaml --devices 8 --cluster h100_sxm");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("| baseline (not searched without --allow-idle"), std::string::npos) << out;
  EXPECT_NE(out.find("don't pipeline: one device takes"), std::string::npos) << out;
}

TEST(PlanEmit, ABadClusterFileNamesItsKey) {
  testing::TempDir tmp;
  const std::string plan = std::string("plan ") + PIPELAB_EXPERIMENTS_DIR + "/quickstart.yaml --devices 2 --cluster ";
  // A file with an impossible value: its line and key; an unknown preset: the names there are.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"device: {tflops: {float32: 10}, memory_gbs: 0, memory_gib: 8}", {"c0.yaml:3", "device.memory_gbs"}},
      {"device: {tflops: {float32: 10}, memory_gbs: 10, memory_gib: -8}", {"memory_gib"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string file = tmp.file(fmt::format("c{}.yaml", i));
    testing::write_text(file, "name: x\nsource: y\n" + cases[i].first + "\nlink: {gbps: 100}\n");
    const auto [code, out] = testing::pipelab(plan + file);
    EXPECT_EQ(code, 2) << out;
    for (const std::string& want : cases[i].second) EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
  const auto [code, out] = testing::pipelab(plan + "h100");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("h100_sxm"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipelab::plan_emit_test
