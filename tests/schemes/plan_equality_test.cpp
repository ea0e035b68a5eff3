// What is planned is what runs, for every registered scheme (the registry decides the cases):
// the lowered schedule the run plan gives for a file (what `pipelab schedule FILE --lowered`
// prints and `pipelab simulate` replays, core/plan/run_plan.h) is, action for action on every
// device, what the run executes (metrics/actions.csv with run.trace: true) — alone, with
// copies of the pipeline, with a global clip, with compressed boundaries and with tied
// weights. Where the plan refuses a combination, the run refuses it with the same message.
#include <gtest/gtest.h>

#include <map>

#include "core/config/config_node.h"
#include "core/experiment/plan_request.h"
#include "core/plan/run_plan.h"
#include "core/schedule/action_kinds.h"
#include "core/scheme/replicas.h"
#include "core/util/error.h"
#include "tests/support/action_lists.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::plan_equality_test {
namespace {

using Lists = testing::ActionLists;

// One batch-norm-free MLP (a tied model is below): 4 mini-batches of 16.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 3, threads: 1, trace: true, progress: false}
)";

// A language model whose embedding and output head share one weight across the stages.
const char* kTiedLm = R"(
model:     {type: transformer, num_words: 40, d_model: 16, heads: 2, ff: 16, layers: 2, head: lm, tie_embeddings: true}
dataset:   {type: tensors, path: lm.pt}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 0, threads: 1, trace: true, progress: false}
)";

/// The actions a trace records (compute and collectives; messages are not traced).
bool traced(const Action& a) { return !is_send(a.kind) && !is_receive(a.kind); }

/// The planned lists: every traced action of `s`, device by device.
Lists planned(const Schedule& s) {
  Lists lists;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (traced(a)) lists[d].push_back(a.str());
    }
  }
  return lists;
}

/// Compiles the plan of `yaml` with `sets` and runs it: the planned lists are the executed
/// ones, or the plan and the run refuse with one message. Returns whether it ran.
bool expect_planned_is_run(const testing::TempDir& dir, const std::string& yaml, std::vector<std::string> sets) {
  SCOPED_TRACE(::testing::PrintToString(sets));
  sets.push_back("run.output=" + dir.file("run"));
  testing::write_text(dir.file("e.yaml"), yaml);
  Experiment e = Experiment::load(dir.file("e.yaml"), sets);
  std::string plan_error;
  std::optional<RunPlan> plan;
  try {
    plan = RunPlan::compile(plan_request(e));
  } catch (const UserError& err) {
    plan_error = err.what();
  }
  RunnerOptions quiet;
  quiet.quiet = true;
  quiet.overwrite = true;
  quiet.summary = false;
  if (!plan) {
    const std::string run_error = testing::user_error([&] { Runner(e, quiet).run(); });
    EXPECT_EQ(run_error, plan_error);
    return false;
  }
  Runner runner(e, quiet);
  // The first schedule run: a mini-batch's, an epoch's, or a never-flushed run's all.
  const int64_t batches = runner.data().train->size() / e.run.batch_size;
  const int64_t covered = plan->scheme().span() == Span::Run ? batches * e.run.epochs : batches;
  const Lists want = planned(plan->training(plan->run_units(e.run.batch_size, covered)));
  runner.run();
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(testing::executed_actions(dir.file("run"), want), want);
  return true;
}

class PlanEquality : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(PlanEquality, WhatThePlanShowsIsWhatTheRunExecutes) {
  const testing::SchemeCase& c = GetParam();
  testing::TempDir dir;
  const std::vector<std::string> scheme{"scheme=" + c.scheme, fmt::format("partition.stages={}", c.stages)};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), scheme.begin(), scheme.end());
    return more;
  };
  EXPECT_TRUE(expect_planned_is_run(dir, kMlp, with({})));
  expect_planned_is_run(dir, kMlp, with({"partition.replicas=2"}));
  expect_planned_is_run(dir, kMlp, with({"optimizer.clip_grad_norm=1"}));
  expect_planned_is_run(dir, kMlp, with({"partition.replicas=2", "optimizer.clip_grad_norm=1"}));
  expect_planned_is_run(
      dir, kMlp, with({"compression={activations: {type: sort_quant, q: 6, s: 2}, gradients: {type: fixpoint, bits: 8}}"}));
  // Auxiliary heads predict one class per example: a language model's targets are not that.
  if (testing::experiment(kMlp, "", with({})).scheme->add_ons()->prepares()) return;
  const at::Tensor x = at::arange(64 * 6, at::kLong).reshape({64, 6}).remainder(40);
  save_tensor_dict(dir.file("lm.pt"), {{"x", x}, {"y", x.roll(-1, 1)}});
  expect_planned_is_run(dir, kTiedLm, with({}));
  expect_planned_is_run(dir, kTiedLm, with({"partition.replicas=2", "optimizer.clip_grad_norm=1"}));
}

std::vector<testing::SchemeCase> two_stage_cases() {
  std::vector<testing::SchemeCase> out;
  for (const testing::SchemeCase& c : testing::scheme_cases()) {
    if (c.stages == 2) out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registry, PlanEquality, ::testing::ValuesIn(two_stage_cases()), testing::scheme_case_name);

// PipeDream's replicated stages: one pipeline whose stages deal the mini-batches round robin.
TEST(PlanEquality, ReplicatedStages) {
  testing::TempDir dir;
  for (const std::string replicas : {"[2, 1]", "[1, 2]", "[2, 2]"}) {
    EXPECT_TRUE(expect_planned_is_run(dir, kMlp, {"scheme={type: pipedream}", "partition.replicas=" + replicas}));
  }
  EXPECT_FALSE(expect_planned_is_run(
      dir, kMlp, {"scheme={type: pipedream}", "partition.replicas=[2, 1]", "optimizer.clip_grad_norm=1"}));
}

}  // namespace
}  // namespace pipelab::plan_equality_test
