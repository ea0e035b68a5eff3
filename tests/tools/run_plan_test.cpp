// One run plan for every command (core/plan/run_plan.h): what `pipelab schedule FILE
// --lowered` prints is what `pipelab run FILE` executes (metrics/actions.csv with
// run.trace: true records its compute actions and collectives, in order, per device), with
// replicas, replicated stages, a global clip and tied weights; and the schedule `simulate`
// replays is the plan's own.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "core/config/yaml_file.h"
#include "core/experiment/experiment.h"
#include "core/experiment/plan_request.h"
#include "core/io/pt_file.h"
#include "core/plan/run_plan.h"
#include "tests/support/action_lists.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/simulate/simulate.h"

namespace pipelab::run_plan_test {
namespace {

using Lists = testing::ActionLists;

bool traced(const std::string& token) {
  return token.find("SEND") == std::string::npos && token.find("RECV") == std::string::npos;
}

/// The lowered lists `pipelab schedule --lowered` printed, without the messages (the trace
/// records compute actions and collectives only).
Lists printed(const std::string& out) {
  Lists lists;
  std::istringstream in(out.substr(out.find("with its messages (lowered):")));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && line.rfind("d", 0) == 0) {
    std::istringstream tokens(line);
    std::string device, token;
    tokens >> device;
    const int d = std::stoi(device.substr(1));
    while (tokens >> token) {
      if (traced(token)) lists[d].push_back(token);
    }
  }
  return lists;
}

const char* kLanguageModel = R"(
model:     {type: transformer, num_words: 40, d_model: 16, heads: 2, ff: 16, layers: 2, head: lm, tie_embeddings: true}
dataset:   {type: tensors, path: lm.pt}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 8, seed: 0, threads: 1, trace: true, max_steps: 1}
)";

/// Writes lm.pt (token windows and next-token targets) beside the experiment.
void write_windows(const testing::TempDir& dir) {
  const at::Tensor x = at::arange(32 * 6, at::kLong).reshape({32, 6}).remainder(40);
  save_tensor_dict(dir.file("lm.pt"), {{"x", x}, {"y", x.roll(-1, 1)}});
}

/// `schedule_flags`: what the run's file fixes and `schedule` asks as a flag (the mini-batches
/// of a schedule that runs an epoch's worth).
void expect_printed_is_run(const testing::TempDir& dir, const std::string& experiment, const std::string& sets,
                           const std::string& schedule_flags = "") {
  SCOPED_TRACE(sets);
  testing::write_text(dir.file("e.yaml"), experiment);
  const auto [code, out] =
      testing::pipelab(fmt::format("schedule {} --lowered {} {}", dir.file("e.yaml"), sets, schedule_flags));
  ASSERT_EQ(code, 0) << out;
  const Lists want = printed(out);
  ASSERT_FALSE(want.empty()) << out;
  const auto [rc, run] =
      testing::pipelab(fmt::format("run --quiet {} {} --overwrite --set run.output={}", dir.file("e.yaml"), sets,
                                   dir.file("run")));
  ASSERT_EQ(rc, 0) << run;
  EXPECT_EQ(testing::executed_actions(dir.file("run"), want), want) << out;
}

TEST(RunPlan, WhatScheduleShowsIsWhatRunExecutes) {
  testing::TempDir dir;
  write_windows(dir);
  // Tied weights across two stages: a model-wide ALLREDUCE before every update.
  expect_printed_is_run(dir, kLanguageModel, "");
  // With replicas, and a global clip on top.
  expect_printed_is_run(dir, kLanguageModel, "--set partition.replicas=2");
  expect_printed_is_run(dir, kLanguageModel, "--set partition.replicas=2 --set optimizer.clip_grad_norm=1");
  // 1F1B and a zero-bubble schedule, tied.
  expect_printed_is_run(dir, kLanguageModel, "--set 'scheme={type: pipedream_flush, chunks: 2}'");
  expect_printed_is_run(dir, kLanguageModel, "--set 'scheme={type: zb_h1, chunks: 2}'");
  // PipeDream's replicated stages on an untied model.
  expect_printed_is_run(dir, testing::kExperiment,
                        "--set run.trace=true --set run.epochs=1 --set 'partition.replicas=[2, 1]' --set "
                        "'scheme={type: pipedream}'",
                        "--microbatches 8");
}

TEST(RunPlan, ScheduleRefusesWhatRunRefusesWithTheSameMessage) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const std::string sets =
      "--set 'partition.replicas=[2, 1]' --set 'scheme={type: pipedream}' --set optimizer.clip_grad_norm=1";
  const auto [c1, schedule] = testing::pipelab(fmt::format("schedule {} {}", dir.file("e.yaml"), sets));
  const auto [c2, run] = testing::pipelab(fmt::format("run {} {} --set run.output={}", dir.file("e.yaml"), sets,
                                                      dir.file("run")));
  EXPECT_EQ(c1, 2) << schedule;
  EXPECT_EQ(c2, 2) << run;
  const std::string message = "replicated stages update at different times, so optimizer.clip_grad_norm has no one "
                              "moment to meet";
  EXPECT_NE(schedule.find(message), std::string::npos) << schedule;
  EXPECT_NE(run.find(message), std::string::npos) << run;
}

TEST(RunPlan, SimulateReplaysThePlansTrainingSchedule) {
  testing::TempDir dir;
  write_windows(dir);
  testing::write_text(dir.file("e.yaml"), kLanguageModel);
  const Experiment e = Experiment::load(dir.file("e.yaml"));
  const RunPlan plan = RunPlan::compile(plan_request(e));
  EXPECT_EQ(plan.sync().scope, CollectiveScope::Model);  // the tie spans the two stages
  sim::SimOptions o;
  o.replicas = plan.replicas();
  o.sync = plan.sync();
  sim::SimCosts costs;
  costs.stages.resize(2);
  for (sim::StageCosts& k : costs.stages) k.seconds[ActionKind::Forward] = k.seconds[ActionKind::Backward] = 1;
  const sim::SimResult r = sim::simulate(*e.scheme, plan.stages(), 2, 4, costs, o, 2);
  EXPECT_EQ(r.schedule.to_text(), plan.training({2}).to_text());
  EXPECT_NE(r.schedule.to_text().find("ALLREDUCE"), std::string::npos);
}

// The ALLREDUCE of tied weights moves what the run moves: each holder of a tie sends the ring's
// 2(n-1)/n of the tied tensor over the n copies of the tie (two per pipeline), per update.
TEST(RunPlan, SimulateMovesTheTiedWeightsGradients) {
  testing::TempDir dir;
  write_windows(dir);
  testing::write_text(dir.file("e.yaml"), kLanguageModel);
  sim::SimCosts costs;
  costs.stages.resize(2);
  for (sim::StageCosts& k : costs.stages) {
    k.seconds[ActionKind::Forward] = k.seconds[ActionKind::Backward] = 1;
    k.tied_bytes = 100;
  }
  const auto bytes = [&](const std::vector<std::string>& sets) {
    const Experiment e = Experiment::load(dir.file("e.yaml"), sets);
    return sim::simulate(RunPlan::compile(plan_request(e)), 2, 4, costs, {}, 2).bytes_per_step;
  };
  EXPECT_DOUBLE_EQ(bytes({}), 2 * 100.0);                               // 2 holders, n = 2: 100 each
  EXPECT_DOUBLE_EQ(bytes({"partition.replicas=2"}), 4 * (2 * 3 / 4.0) * 100);  // 4 holders, n = 4
}

// The run writes its tied bytes into costs.json (an embedding of 40 x 16 floats on both
// stages), and `pipelab simulate --costs` moves them.
TEST(RunPlan, CostsJsonCarriesTheTiesAndSimulateMovesThem) {
  testing::TempDir dir;
  write_windows(dir);
  testing::write_text(dir.file("e.yaml"), kLanguageModel);
  const auto [rc, run] = testing::pipelab(fmt::format("run --quiet {} --set run.output={}", dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(rc, 0) << run;
  const std::string costs = testing::read_text(dir.file("run/metrics/costs.json"));
  size_t at = 0, seen = 0;
  while ((at = costs.find("\"tied_bytes\": 2560", at)) != std::string::npos) ++seen, ++at;
  EXPECT_EQ(seen, 2u) << costs;
  const auto [code, out] = testing::pipelab(
      fmt::format("simulate {} --costs {}", dir.file("e.yaml"), dir.file("run/metrics/costs.json")));
  ASSERT_EQ(code, 0) << out;
  // The bytes moved per step (the last column): the messages and 2 x 2560 tied bytes.
  const size_t row = out.find("| gpipe |");
  ASSERT_NE(row, std::string::npos) << out;
  const std::string line = out.substr(row, out.find('\n', row) - row);
  const std::string last = line.substr(line.rfind('|', line.size() - 2) + 1);
  EXPECT_GE(std::stod(last) * 1024 * 1024, 2 * 2560.0) << out;
}

// PipeDream's replicated stages, which `run` trains, are simulated as the plan has them.
TEST(RunPlan, SimulateReplaysReplicatedStages) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const std::vector<std::string> sets{"partition.replicas=[2, 1]", "scheme={type: pipedream}"};
  const Experiment e = Experiment::load(dir.file("e.yaml"), sets);
  const RunPlan plan = RunPlan::compile(plan_request(e));
  sim::SimCosts costs;
  costs.stages.resize(2);
  for (sim::StageCosts& k : costs.stages) k.seconds[ActionKind::Forward] = k.seconds[ActionKind::Backward] = 1;
  const sim::SimResult r = sim::simulate(plan, 8, 4, costs, {}, 1);
  EXPECT_EQ(r.schedule.to_text(), plan.training({8}).to_text());
  EXPECT_EQ(r.devices, 3);
  // Stage 0's two copies take the mini-batches in turn: near twice the throughput of one.
  const auto [code, out] = testing::pipelab(fmt::format("simulate {} --set 'partition.replicas=[2, 1]' --set "
                                                        "'scheme={{type: pipedream}}' --device-flops 1",
                                                        dir.file("e.yaml")));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("replicated stages (a count per stage)"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipelab::run_plan_test

namespace pipelab::run_plan_test {
namespace {

/// The plan of the test experiment with `sets`; the experiment stays alive with it (a plan
/// points at its scheme).
RunPlan plan_of(const std::vector<std::string>& sets) {
  static std::vector<std::unique_ptr<Experiment>> kept;
  kept.push_back(std::make_unique<Experiment>(Experiment::parse(testing::kExperiment, "e.yaml", sets)));
  return RunPlan::compile(plan_request(*kept.back()));
}

// The step loop cuts training as the plan says, for each flush span: a flush per mini-batch
// is a one-epoch pass of one-mini-batch runs; a flush per epoch a one-epoch pass of one run;
// a pipeline never flushed one pass of every epoch in one run, which cannot stop at a step.
TEST(RunPlan, CutsTrainingIntoPassesAndRunsByItsSpan) {
  const RunPlan gpipe = plan_of({});
  EXPECT_EQ(gpipe.epochs_per_pass(3), 1);
  EXPECT_EQ(gpipe.mini_batches_per_run(8), 1);
  EXPECT_TRUE(gpipe.stops_at_steps());
  const RunPlan epoch = plan_of({"scheme={type: pipedream, flush: epoch}"});
  EXPECT_EQ(epoch.epochs_per_pass(3), 1);
  EXPECT_EQ(epoch.mini_batches_per_run(8), 8);
  EXPECT_TRUE(epoch.stops_at_steps());
  const RunPlan never = plan_of({"scheme={type: pipedream_2bw, flush: never}"});
  EXPECT_EQ(never.epochs_per_pass(3), 3);
  EXPECT_EQ(never.mini_batches_per_run(24), 24);
  EXPECT_FALSE(never.stops_at_steps());
}

// Replica r's view: whole pipelines are numbered replica by replica (r * S + p); a replicated
// stage with fewer copies than r + 1 gives its last. Replica 0 is the model evaluated and saved.
TEST(RunPlan, ReplicaViewNamesEachReplicasStages) {
  const RunPlan replicas = plan_of({"partition.replicas=2"});
  EXPECT_EQ(replicas.replica_view(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(replicas.replica_view(1), (std::vector<int>{2, 3}));
  const RunPlan replicated = plan_of({"partition.replicas=[2, 1]", "scheme={type: pipedream}"});
  EXPECT_EQ(replicated.replica_view(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(replicated.replica_view(1), (std::vector<int>{2, 1}));
  EXPECT_EQ(plan_of({}).replica_view(0), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace pipelab::run_plan_test
