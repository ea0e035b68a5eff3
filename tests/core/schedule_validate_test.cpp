// The validator against the schedule files a hostile probe wrote
// (tools/probe/hostile_surfaces.py, "schedule-files"): each class of schedule that would have
// trained on part of the data, failed inside an action, or been reported at a position of
// the lowered list is refused at the user's own file:line:column, with a fix.
#include <gtest/gtest.h>

#include <set>

#include "core/schedule/dataflow.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "schemes/schedules/modern.h"
#include "tests/support/helpers.h"

namespace pipelab::schedule_validate_test {
namespace {

/// What a synchronous pipeline scheme holds a schedule file to (schemes/custom.cpp).
ValidateOptions pipeline_rules() {
  ValidateOptions o;
  o.kinds = {ActionKind::Forward, ActionKind::Backward, ActionKind::BackwardInput, ActionKind::BackwardWeight,
             ActionKind::Update};
  o.training = true;
  o.coverage = Coverage::EveryStage;
  o.one_update = true;
  return o;
}

std::string refused(const std::string& text, const ValidateOptions& o = pipeline_rules(), int replicas = 1) {
  return testing::user_error([&] {
    Schedule s = Schedule::parse(text, "my.sched");
    s.set_replicas(replicas);
    validate_schedule(s, o);
  });
}

TEST(ScheduleFiles, ErrorsPointAtTheActionAsWritten) {
  // 1B0 comes before 1F0 on line 2: the error names line 2, column 5, and quotes the line,
  // not a position in the lowered list (which has SEND/RECV the user never wrote).
  const std::string e = refused("d0: 0F0 0B0 0U\nd1: 1B0 1F0 1U\n");
  EXPECT_NE(e.find("my.sched:2:5: invalid schedule: '1B0' on device d1: it runs before 1F0. Fix: move it after 1F0."),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("  2 | d1: 1B0 1F0 1U\n          ^^^"), std::string::npos) << e;
  // A deadlock names where each device stops, as written.
  const std::string d = refused("d0: 0F0 0B0 0F1 0B1 0U\nd1: 1F1 1B1 1F0 1B0 1U\n");
  EXPECT_NE(d.find("my.sched: invalid schedule: deadlock: no device can go on. Fix:"), std::string::npos) << d;
  EXPECT_NE(d.find("device d0 stops at '0B0' at my.sched:1:9, waiting for 1SEND_B0"), std::string::npos) << d;
  EXPECT_NE(d.find("device d1 stops at '1F1' at my.sched:2:5, waiting for 0SEND_F1"), std::string::npos) << d;
}

TEST(ScheduleFiles, EveryMicroBatchOfEveryStageRunsOnce) {
  // Micro-batch 1 on no stage: 1 of 3 chunks of each mini-batch would never train.
  std::string e = refused("d0: 0F0 0F2 0B0 0B2 0U\nd1: 1F0 1F2 1B0 1B2 1U\n");
  EXPECT_NE(e.find("no stage runs micro-batch 1 (the schedule's micro-batches are 0..2)"), std::string::npos) << e;
  e = refused("d0: 0F0 0F1 0B0 0B1 0U\nd1: 1F0 1B0 1U\n");
  EXPECT_NE(e.find("stage 1 never runs micro-batch 1"), std::string::npos) << e;
  // A huge id is not "a billion micro-batches": it is a gap, found without allocating.
  e = refused("d0: 0F0 0F999999999 0B0 0B999999999 0U\nd1: 1F0 1F999999999 1B0 1B999999999 1U\n");
  EXPECT_NE(e.find("no stage runs micro-batch 1"), std::string::npos) << e;
  // Replicas (of a one-stage pipeline, dp): each micro-batch on exactly one of them.
  ValidateOptions replicas = pipeline_rules();
  replicas.kinds.push_back(ActionKind::AllReduce);
  EXPECT_EQ(refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F1 1B1 1ALLREDUCE 1U\n", replicas, 2), "");
  EXPECT_NE(refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F0 1B0 1ALLREDUCE 1U\n", replicas, 2)
                .find("micro-batch 0 runs on stage 0 of replica 0 and stage 1 of replica 1"),
            std::string::npos);
  // Two replicas of a two-stage pipeline: a micro-batch on every stage of one replica.
  const std::string two = "d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F0 1B0 1ALLREDUCE 1U\n"
                          "d2: 2F1 2B1 2ALLREDUCE 2U\nd3: 3F1 3B1 3ALLREDUCE 3U\n";
  EXPECT_EQ(refused(two, replicas, 2), "");
  EXPECT_NE(refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F1 1B1 1ALLREDUCE 1U\n"
                    "d2: 2F1 2B1 2ALLREDUCE 2U\nd3: 3F0 3B0 3ALLREDUCE 3U\n",
                    replicas, 2)
                .find("runs on stage 0 of replica 0 and stage 3 of replica 1"),
            std::string::npos);
  // A stage's replicas meet at every all-reduce: one more on stage 2 than on stage 0.
  EXPECT_NE(refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F0 1B0 1ALLREDUCE 1U\n"
                    "d2: 2F1 2B1 2ALLREDUCE 2ALLREDUCE 2U\nd3: 3F1 3B1 3ALLREDUCE 3U\n",
                    replicas, 2)
                .find("stage 2 runs 2 ALLREDUCE and stage 0, of its collective group, 1"),
            std::string::npos);
}

TEST(ScheduleFiles, WhatCannotRunIsRefusedBeforeItRuns) {
  EXPECT_NE(refused("d0: 0F0 0F1\nd1: 1F0 1F1\n").find("it has no backward, so it would train nothing"),
            std::string::npos);
  EXPECT_NE(refused("d0: 0F0 0B0 0U\nd1: 2F0 2B0 2U\n").find("stage 1 has no actions"), std::string::npos);
  EXPECT_NE(refused("d0: 0F0 0B0 0U\nd1:\nd2: 1F0 1B0 1U\n").find("device d1 has no actions"), std::string::npos);
  // A stage that only joins the all-reduce and steps runs no micro-batch of a pipeline.
  ValidateOptions any_kind = pipeline_rules();
  any_kind.kinds.clear();
  EXPECT_NE(refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1ALLREDUCE 1U\n", any_kind)
                .find("my.sched: invalid schedule: stage 1 never runs micro-batch 0, which other stages run"),
            std::string::npos)
      << refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1ALLREDUCE 1U\n", any_kind);
  // An all-reduce needs replicas, an H a head: a scheme without them refuses them.
  std::string e = refused("d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F0 1B0 1ALLREDUCE 1U\n");
  EXPECT_NE(e.find("my.sched:1:13:"), std::string::npos) << e;
  EXPECT_NE(e.find("this scheme runs no ALLREDUCE (an all-reduce needs replicas of a stage)"), std::string::npos) << e;
  e = refused("d0: 0F0 0B0 0U\nd1: 1F0 1H0 1B0 1U\n");
  EXPECT_NE(e.find("this scheme runs no H (an H needs a stage with an auxiliary head)"), std::string::npos) << e;
  // Two steps with no gradient between them, or two steps of a synchronous scheme.
  e = refused("d0: 0F0 0B0 0U\nd1: 1F0 1B0 1U 1U\n");
  EXPECT_NE(e.find("my.sched:2:16: invalid schedule: '1U' on device d1: stage 1 steps with no gradient since its "
                   "previous step"),
            std::string::npos)
      << e;
  e = refused("d0: 0F0 0B0 0U 0F1 0B1 0U\nd1: 1F0 1B0 1U 1F1 1B1 1U\n");
  EXPECT_NE(e.find("stage 0 steps twice; this scheme's weights are synchronous"), std::string::npos) << e;
  ValidateOptions async = pipeline_rules();
  async.one_update = false;
  EXPECT_EQ(refused("d0: 0F0 0B0 0U 0F1 0B1 0U\nd1: 1F0 1B0 1U 1F1 1B1 1U\n", async), "");
}

TEST(ScheduleFiles, HalfWrittenLinesAndHugeNumbersAreExplained) {
  const auto parse_error = [](const std::string& text) {
    return testing::user_error([&] { Schedule::parse(text, "my.sched"); });
  };
  EXPECT_NE(parse_error("d0: 0F0 0B0 0U\nd1 1F0 1B0 1U\n").find("my.sched:2:1: 'd1' looks like a device label without its colon"),
            std::string::npos);
  EXPECT_NE(parse_error("d0: 0F0 0B0 0U 1\n").find("it has a stage but no action"), std::string::npos);
  EXPECT_NE(parse_error("d999999999: 0F0\n").find("beyond the 65536 devices"), std::string::npos);
  EXPECT_NE(parse_error("d0: 0F0\nd70000: 1F0\n").find("beyond the 65536 devices"), std::string::npos);
  EXPECT_NE(parse_error("0F0 999999999F0\n").find("stage 999999999 is too large"), std::string::npos);
  EXPECT_NE(parse_error("0F99999999999\n").find("micro-batch 99999999999 is too large"), std::string::npos);
  EXPECT_NE(parse_error(std::string("d0: 0F0\0 0B0\n", 13)).find("my.sched:1:8: a NUL byte"), std::string::npos);
  EXPECT_NE(parse_error("d0: 0F0 0\x01X\n").find("bad action '0\\x01X'"), std::string::npos);
}

/// The walk as docs/design.md defines it: rounds over all devices in order, each running at
/// most one ready action.
std::vector<std::pair<int, size_t>> reference_walk(const Schedule& s) {
  std::vector<std::pair<int, size_t>> order;
  std::set<std::tuple<int, char, int>> sent;
  const auto collectives = all_reduce_positions(s);
  std::vector<size_t> next(static_cast<size_t>(s.devices()), 0), done(static_cast<size_t>(s.devices()), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < s.devices(); ++d) {
      size_t& i = next[static_cast<size_t>(d)];
      if (i >= s.device(d).size()) continue;
      const Action& a = s.device(d)[i];
      if (is_receive(a.kind) && !sent.count(message_key(a))) continue;
      if (a.kind == ActionKind::AllReduce) {
        const size_t k = done[static_cast<size_t>(d)];
        bool all = true;
        for (int q = 0; q < s.devices(); ++q) {
          const auto& c = collectives[static_cast<size_t>(q)];
          all = all && k < c.size() && next[static_cast<size_t>(q)] >= c[k];
        }
        if (!all) continue;
        ++done[static_cast<size_t>(d)];
      }
      order.emplace_back(d, i);
      if (is_send(a.kind)) sent.insert(message_key(a));
      if (is_receive(a.kind)) sent.erase(message_key(a));
      ++i;
      progress = true;
    }
  }
  return order;
}

TEST(ScheduleWalk, TheEventDrivenWalkKeepsTheRoundRobinOrder) {
  // The sequential executor runs actions in this order, so it must not change.
  const std::vector<Schedule> cases{
      lower(schedules::gpipe(4, 6)), lower(schedules::one_f_one_b(5, 9)), lower(schedules::interleaved_1f1b(3, 2, 6)),
      lower(schedules::zbv(3, 6)), lower(schedules::dualpipe_v(4, 8)),
      Schedule::parse("0F0 0B0 0ALLREDUCE 0U 0ALLREDUCE\n1F1 1B1 1ALLREDUCE 1ALLREDUCE 1U\n2ALLREDUCE 2U 2ALLREDUCE\n")};
  for (Schedule s : cases) {
    // The last case is three replicas of one stage: its all-reduces are every device's.
    if (s.has_communication() && s.device(0).back().kind == ActionKind::AllReduce) s.set_replicas(3);
    std::vector<std::pair<int, size_t>> order;
    const WalkResult walk = walk_schedule(s, [&](int d, size_t i) { order.emplace_back(d, i); });
    EXPECT_TRUE(walk.complete);
    EXPECT_EQ(order, reference_walk(s)) << s.to_text();
  }
  // A long pipeline (20,000 stages, 3 micro-batches) completes: O(actions x log devices).
  const Schedule long_one = lower(schedules::one_f_one_b(20000, 3));
  size_t visited = 0;
  EXPECT_TRUE(walk_schedule(long_one, [&](int, size_t) { ++visited; }).complete);
  size_t actions = 0;
  for (int d = 0; d < long_one.devices(); ++d) actions += long_one.device(d).size();
  EXPECT_EQ(visited, actions);
}

}  // namespace
}  // namespace pipelab::schedule_validate_test
