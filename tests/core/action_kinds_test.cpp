// The action-kind table (core/schedule/action_kinds.h) drives parsing, printing, lowering,
// the neighbour rule, validation, the timeline's costs and the executors' statistics. These
// tests loop over its rows, so a kind added to the table without a case here, or one that
// some part of the core does not understand, fails: every row is parsed and printed back,
// appears in a schedule that lowers, validates and simulates with the row's own cost, and
// every compute row a stage runs without extras is run by an executor and counted.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "tests/support/helpers.h"
#include "tests/support/linear_pipeline.h"

namespace pipelab::action_kinds_test {
namespace {

/// Compute-only schedules that, once lowered, hold every kind between them.
struct Case {
  const char* text;
  int replicas = 1;
  bool heads = false;  ///< lowered with SEND_H (an auxiliary head's gradient goes back)
};
const std::vector<Case> kCases{
    {"d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1F1 1B0 1B1 1U"},                     // F, B, U, SEND/RECV F, B
    {"d0: 0F0 0I0 0W0 0U\nd1: 1F0 1I0 1W0 1U"},                             // I, W
    {"d0: 0F0 0B0 0U\nd1: 1F0 1H0 1B0 1U", 1, true},                        // H, SEND/RECV H
    {"d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F1 1B1 1ALLREDUCE 1U", 2},            // ALLREDUCE
    {"d0: 0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"},  // OFFLOAD, RELOAD
};

Schedule lowered(const Case& c) {
  Schedule compute = Schedule::parse(c.text);
  compute.set_replicas(c.replicas);
  if (compute.has_communication()) return compute;  // ALLREDUCE: replicas exchange no messages
  Lowering how;
  if (c.heads) how.sends_back.push_back(ActionKind::Head);
  return lower(compute, how);
}

/// A cost per compute kind that tells the kinds apart (1 + the row's index).
CostModel distinct_costs(int stages) {
  CostModel c;
  for (const ActionKindInfo& k : action_kinds()) {
    if (k.role == KindRole::Compute) c.seconds[k.kind].assign(static_cast<size_t>(stages), 1.0 + static_cast<double>(k.kind));
  }
  return c;
}

TEST(ActionKinds, TheTableFollowsTheEnumAndNamesAreUnique) {
  std::set<std::string> names;
  for (size_t i = 0; i < action_kinds().size(); ++i) {
    const ActionKindInfo& k = action_kinds()[i];
    EXPECT_EQ(static_cast<size_t>(k.kind), i);
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " twice";
    // A message has a direction and a kind that carries it each way.
    if (k.message) {
      EXPECT_NE(k.direction, 0) << k.name;
      EXPECT_EQ(payload(send_kind(k.message)), k.message);
      EXPECT_EQ(payload(receive_kind(k.message)), k.message);
    }
    if (k.role == KindRole::Compute) EXPECT_NE(k.cost_key, nullptr) << k.name << " needs a cost key";
  }
}

TEST(ActionKinds, EveryRowParsesAndPrintsBack) {
  for (const ActionKindInfo& k : action_kinds()) {
    const Action a{3, k.kind, k.micro_batch ? 7 : -1};
    std::string why;
    const Action back = Action::parse(a.str(), why);
    EXPECT_TRUE(why.empty()) << a.str() << ": " << why;
    EXPECT_EQ(back, a) << a.str();
    EXPECT_EQ(a.str(), k.micro_batch ? fmt::format("3{}7", k.name) : fmt::format("3{}", k.name));
  }
}

TEST(ActionKinds, TheNeighbourRuleFollowsEachMessagesDirection) {
  for (const ActionKindInfo& k : action_kinds()) {
    const Action a{2, k.kind, 0};
    const int expected = k.role == KindRole::Send      ? 2 + k.direction
                         : k.role == KindRole::Receive ? 2 - k.direction
                                                       : 2;
    EXPECT_EQ(peer(a), expected) << a.str();
  }
  EXPECT_EQ(peer({2, ActionKind::SendF, 0}), 3);
  EXPECT_EQ(peer({2, ActionKind::RecvB, 0}), 3);
  EXPECT_EQ(peer({2, ActionKind::SendH, 0}), 1);
}

TEST(ActionKinds, EveryRowLowersValidatesAndSimulatesAtItsOwnCost) {
  std::set<ActionKind> seen;
  for (const Case& c : kCases) {
    const Schedule s = lowered(c);
    ASSERT_NO_THROW(validate_schedule(s)) << c.text << "\n" << s.to_text();
    EXPECT_EQ(Schedule::parse(s.to_text()).to_text(), s.to_text()) << "the text form round-trips";
    const CostModel costs = distinct_costs(s.stages());
    const Timeline t = simulate_timeline(s, costs);
    for (const auto& device : t.devices) {
      for (const TimedAction& x : device) {
        EXPECT_DOUBLE_EQ(x.end - x.start, 1.0 + static_cast<double>(x.action.kind)) << x.action.str();
      }
    }
    for (int d = 0; d < s.devices(); ++d) {
      for (const Action& a : s.device(d)) seen.insert(a.kind);
    }
  }
  for (const ActionKindInfo& k : action_kinds()) {
    EXPECT_TRUE(seen.count(k.kind)) << k.name << " is in no case: add a schedule that holds it to kCases";
  }
}

TEST(ActionKinds, AKindWithoutCostsOfItsOwnCostsItsFallbacksShare) {
  CostModel c = CostModel::uniform(1, 1, 4);
  EXPECT_DOUBLE_EQ(c.cost(Action::I(0, 0)), 2);
  EXPECT_DOUBLE_EQ(c.cost(Action::W(0, 0)), 2);
  c.seconds[ActionKind::BackwardInput] = {3};
  EXPECT_DOUBLE_EQ(c.cost(Action::I(0, 0)), 3);
  EXPECT_DOUBLE_EQ(c.cost({0, ActionKind::SendF, 0}), 0) << "communication costs only its transfer";
}

TEST(ActionKinds, ExecutorsCountEveryComputeKindTheyRun) {
  // F, B, I, W and U on plain Linear stages (H needs an auxiliary head, ALLREDUCE replicas:
  // their runs are tests/schemes' interlocking and replicas tests).
  const char* text = "d0: 0F0 0F1 0B0 0I1 0W1 0U\nd1: 1F0 1F1 1B0 1I1 1W1 1U";
  for (const char* executor : {"{type: sequential}", "{type: threaded, intra_op_threads: 1}"}) {
    testing::LinearPipeline p("{type: gpipe, chunks: 2}", "{type: sgd, lr: 0.1}", 2, 4);
    struct Ones : Feed {
      at::Tensor input(int) override { return at::ones({2, 4}); }
      at::Tensor target(int) override { return at::zeros({2}, at::kLong); }
      void on_result(int, const MicroBatchResult&) override {}
    } feed;
    auto run = testing::make_executor(executor);
    run->run(Schedule::parse(text), p.slots, feed, RunMode::Train);
    const std::map<ActionKind, int64_t> expected{{ActionKind::Forward, 2}, {ActionKind::Backward, 1},
                                                 {ActionKind::BackwardInput, 1}, {ActionKind::BackwardWeight, 1},
                                                 {ActionKind::Update, 1}};
    for (const ActionKindInfo& k : action_kinds()) {
      if (k.role != KindRole::Compute) continue;
      const auto it = expected.find(k.kind);
      for (size_t stage = 0; stage < 2; ++stage) {
        EXPECT_EQ(run->stats().time[k.kind][stage].count, it == expected.end() ? 0 : it->second)
            << executor << " stage " << stage << " " << k.name;
      }
    }
    const CostModel measured = run->stats().cost_model();
    EXPECT_EQ(measured.seconds[ActionKind::Forward].size(), 2u);
  }
}

}  // namespace
}  // namespace pipelab::action_kinds_test
