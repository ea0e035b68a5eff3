// A small version of tools/bench/validate_plan.py: `pipelab plan --time-blocks` ranks four
// plans for the 2 devices here whose predicted steps are at least 2.5 times apart, and measured
// runs (threaded executor, one thread per device) rank them the same. Steps are timed, so
// the candidates are far apart, each keeps the faster of two interleaved runs and ctest runs
// this test alone (tests/CMakeLists.txt). Each run trains 16 steps: a run's first two steps
// cost several milliseconds more than the rest (first allocations), which in 4 steps doubled
// the measured step of the fastest plan (4 ms predicted) and reordered it (CI, 2026-11-27).
// Measured over predicted steps run from 0.7 to 1.8 across plans here (docs/plan.md), so
// neighbours 2.5 times apart keep their order; twice apart, they came within 1.3x.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tests/tools/plan_support.h"

namespace pipelab::plan_ranking_test {
namespace {

const char* kMlp = R"(
model:     {type: mlp, sizes: [128, 512, 512, 512, 10]}
dataset:   {type: synthetic, samples: 2048, test_samples: 16, shape: [128], classes: 10}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.01, momentum: 0.9}
run:       {epochs: 1, batch_size: 128, seed: 0, executor: {type: threaded, intra_op_threads: 1}, progress: false}
)";

TEST(PlanRanking, FourPlansFarApartRankAsMeasuredRunsRankThem) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const auto [code, out] = testing::pipelab(fmt::format("plan {} --devices 2 --time-blocks --allow-idle --top 1000 "
                                                        "--json {}",
                                                        dir.file("e.yaml"), dir.file("ranked.json")));
  ASSERT_EQ(code, 0) << out;
  const auto ranked = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")))["ranked"];
  std::vector<nlohmann::json> picked;
  for (const auto& c : ranked) {
    if (picked.empty() || c["step_seconds"].get<double>() >= 2.5 * picked.back()["step_seconds"].get<double>()) {
      picked.push_back(c);
    }
    if (picked.size() == 4) break;
  }
  ASSERT_EQ(picked.size(), 4u) << out;
  std::vector<double> measured(picked.size(), 1e30);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < picked.size(); ++i) {
      const std::string run = dir.file(fmt::format("run{}-{}", i, round));
      const auto [rc, log] = testing::pipelab(fmt::format("run --quiet {} --set run.output={} {}", dir.file("e.yaml"),
                                                          run, testing::plan_candidate_flags(picked[i])));
      ASSERT_EQ(rc, 0) << picked[i]["label"] << "\n" << log;
      const auto costs = nlohmann::json::parse(testing::read_text(run + "/metrics/costs.json"));
      measured[i] = std::min(measured[i], costs["step_seconds"].get<double>());
    }
  }
  for (size_t i = 1; i < picked.size(); ++i) {
    EXPECT_LT(measured[i - 1], measured[i]) << picked[i - 1]["label"] << " (predicted "
                                            << picked[i - 1]["step_seconds"] << " s) against " << picked[i]["label"]
                                            << " (predicted " << picked[i]["step_seconds"] << " s)";
  }
}

}  // namespace
}  // namespace pipelab::plan_ranking_test
