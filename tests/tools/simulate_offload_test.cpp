// partition.offload (PipeOffload) as `simulate` prices it: the plan's schedule carries the
// pass's OFFLOAD and RELOAD actions, each copy occupies its device's link to the host beside
// compute, the device's memory drops when a copy out ends and rises when a copy back starts
// (by hand on a 4-stage 1F1B), a link too slow to hide the copies delays the backwards, and
// what the pass cannot apply to is refused at its key.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/experiment/experiment.h"
#include "core/experiment/plan_request.h"
#include "core/plan/run_plan.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/simulate/simulate.h"

namespace pipelab::simulate_offload_test {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const char* const kFile = R"(
model:     {type: mlp, sizes: [8, 16, 16, 16, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [8], classes: 4}
partition: {stages: 4}
scheme:    {type: pipedream_flush, chunks: 8}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 1, threads: 1, progress: false}
)";

/// The file's plan with `sets`; the experiment stays alive with it (a plan points at its scheme).
RunPlan plan_of(const std::vector<std::string>& sets) {
  static std::vector<std::unique_ptr<Experiment>> kept;
  kept.push_back(std::make_unique<Experiment>(Experiment::parse(kFile, "e.yaml", sets)));
  return RunPlan::compile(plan_request(*kept.back()));
}

/// Four stages of F = 1 s, B = 2 s, each micro-batch's forward keeping 100 bytes; free links
/// between devices, a link to the host of 1 byte per `copy` seconds.
sim::SimCosts costs(double copy) {
  sim::SimCosts c;
  for (int s = 0; s < 4; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.retained_bytes = 100;
    c.stages.push_back(k);
  }
  c.link.host_gbps = copy > 0 ? 8e-9 / copy : 0;
  return c;
}

TEST(SimulateOffload, TheDeviceKeepsOneMicroBatchWhenEveryOneGoesToTheHost) {
  // 1F1B keeps p = 4 micro-batches on stage 0's device at its peak. Offloading all of them
  // with a prefetch of 1 (instant copies), stage 0 runs 0F0 0OFFLOAD0 0F1 0OFFLOAD1 0F2
  // 0OFFLOAD2 0RELOAD0 0F3 0OFFLOAD3 0B0 0RELOAD1 0F4 ... 0F7 0OFFLOAD7 0RELOAD5 0B4 0RELOAD6 0B5
  // 0RELOAD7 0B6 0B7 0U: each micro-batch leaves at its forward's end and is back one compute
  // action ahead of its backward. In the steady state the device holds one; in the cool-down
  // each backward runs with the next micro-batch back already: 2. The host holds at most 3
  // (micro-batches 0, 1, 2 before the first reload; 5, 6, 7 after the last offload).
  const RunPlan none = plan_of({});
  const RunPlan all = plan_of({"partition.offload={stages: [0], fraction: 1, prefetch: 1}"});
  const sim::SimResult kept = sim::simulate(none, 8, 2, costs(0), {});
  const sim::SimResult moved = sim::simulate(all, 8, 2, costs(0), {});
  EXPECT_DOUBLE_EQ(kept.peak_activation_bytes[0], 400);
  EXPECT_DOUBLE_EQ(moved.peak_activation_bytes[0], 200);
  EXPECT_DOUBLE_EQ(moved.host_peak_bytes[0], 300);
  for (int d = 1; d < 4; ++d) EXPECT_DOUBLE_EQ(moved.peak_activation_bytes[d], kept.peak_activation_bytes[d]) << d;
  EXPECT_DOUBLE_EQ(moved.step_seconds, kept.step_seconds);  // copies that take no time cost none
  // The schedule replayed is the plan's, with the pass's moves.
  EXPECT_NE(moved.schedule.to_text().find("0OFFLOAD0"), std::string::npos);
  EXPECT_EQ(moved.schedule.to_text(), all.training({8}).to_text());
}

TEST(SimulateOffload, CopiesHideBehindComputeUntilTheLinkIsTooSlow) {
  // A copy of 100 bytes at 1 byte per 0.005 s takes 0.5 s: shorter than the compute action
  // it is issued ahead of (1 s), so every backward finds its activations back and the step
  // is unchanged. At 0.05 s per byte (5 s a copy) the backwards wait for their RELOADs.
  const RunPlan none = plan_of({});
  const RunPlan half = plan_of({"partition.offload={stages: [0], fraction: 0.5, prefetch: 1}"});
  const double step = sim::simulate(none, 8, 2, costs(0.005), {}).step_seconds;
  const sim::SimResult fast = sim::simulate(half, 8, 2, costs(0.005), {});
  EXPECT_DOUBLE_EQ(fast.step_seconds, step);
  ASSERT_EQ(fast.timeline.copies.size(), 8u);  // 4 micro-batches out and back
  for (const TimedTransfer& x : fast.timeline.copies) EXPECT_NEAR(x.end - x.start, 0.5, 1e-12) << x.send.str();
  EXPECT_GT(sim::simulate(half, 8, 2, costs(0.05), {}).step_seconds, step + 1);
}

std::string refused(const std::string& offload, const std::vector<std::string>& more = {}) {
  std::vector<std::string> sets = more;
  sets.push_back("partition.offload=" + offload);
  return testing::user_error([&] { plan_of(sets); });
}

TEST(SimulateOffload, WhatCannotOffloadIsRefusedAtItsKey) {
  EXPECT_HAS(refused("{stages: [4]}"), "partition.offload.stages: stage 4 is not a pipeline stage");
  EXPECT_HAS(refused("{stages: [1]}", {"partition.recompute=[1]"}), "stage 1 recomputes its forward");
  EXPECT_HAS(refused("{stages: [0], fraction: 0}"), "partition.offload.fraction");
  EXPECT_HAS(refused("{stages: [0], speed: 2}"), "speed");
  EXPECT_HAS(refused("{fraction: 0.5}"), "offloading no stage");
  EXPECT_HAS(refused("sometimes"), "none, or a map");
  // `except_last` skips the stages that recompute; `none` is no offload.
  EXPECT_FALSE(plan_of({"partition.offload=none"}).offloads_any());
  const RunPlan some = plan_of({"partition.recompute=[1]", "partition.offload={stages: except_last}"});
  EXPECT_TRUE(some.offloads(0));
  EXPECT_FALSE(some.offloads(1));
  EXPECT_TRUE(some.offloads(2));
  EXPECT_FALSE(some.offloads(3));
}

TEST(SimulateOffload, ARunMovesActivationsAndEveryReaderShowsTheMoves) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kFile);
  // `run` executes the plan's OFFLOAD and RELOAD actions, and its summary gives the host's
  // peak (tests/exec/offload_test.cpp checks the numbers). On two stages: a stage of one
  // block saves nothing but its input and output, which stay (core/stage/saved_tensors.h).
  const auto [code, out] = testing::pipelab(
      fmt::format("run {} --set partition.stages=2 --set 'partition.offload={{stages: [0]}}' --set run.output={}",
                  dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "of offloaded activations");
  const auto [shown, text] =
      testing::pipelab(fmt::format("schedule {} --set 'partition.offload={{stages: [0]}}'", dir.file("e.yaml")));
  EXPECT_EQ(shown, 0) << text;
  EXPECT_HAS(text, "0OFFLOAD");
  // `simulate` takes the cluster's link to the host, says it, gives the host's peaks, and
  // draws each copy on its device's row. On two stages stage 0's first block's output (its
  // second block's input) moves; on four, stage 0 is one block, which offers nothing to move.
  const auto [simulated, report] = testing::pipelab(
      fmt::format("simulate {} --cluster h100_sxm --set partition.stages=2 --set 'partition.offload={{stages: [0]}}' "
                  "--svg {}",
                  dir.file("e.yaml"), dir.file("t.svg")));
  EXPECT_EQ(simulated, 0) << report;
  EXPECT_HAS(report, "to the host 400 Gbit/s each way and 10 us per copy (partition.offload)");
  EXPECT_HAS(report, "offloaded to the host, most at once");
  const auto [one_block, nothing] = testing::pipelab(
      fmt::format("simulate {} --cluster h100_sxm --set 'partition.offload={{stages: [0]}}'", dir.file("e.yaml")));
  EXPECT_EQ(one_block, 0) << nothing;
  EXPECT_EQ(nothing.find("offloaded to the host"), std::string::npos) << nothing;
  const std::string svg = testing::read_text(dir.file("t.svg"));
  EXPECT_HAS(svg, "class=\"copy\" data-action=\"0OFFLOAD");
  EXPECT_HAS(svg, "class=\"copy\" data-action=\"0RELOAD");
}

}  // namespace
}  // namespace pipelab::simulate_offload_test
