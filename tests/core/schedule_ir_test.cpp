// The schedule IR beyond the classic tables: lowering (which SEND/RECV go where), the
// validator's placement, message and I/W rules, the CSV form, the runtime window, and the
// text round trip of every registered scheme's schedule.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/config/registry.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/dataflow.h"
#include "core/schedule/validate.h"
#include "core/scheme/scheme.h"
#include "tests/support/helpers.h"

namespace pipelab::schedule_ir_test {
namespace {

std::string validation_error(const std::string& text, int replicas = 1) {
  return testing::user_error([&] {
    Schedule s = Schedule::parse(text);
    s.set_replicas(replicas);
    validate_schedule(s);
  });
}

TEST(Lowering, AddsEachMessageNextToItsProducerAndConsumer) {
  EXPECT_EQ(lower(schedules::gpipe(2, 2)).to_text(),
            "d0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B1 0B1 0RECV_B0 0B0 0U\n"
            "d1: 1RECV_F0 1F0 1RECV_F1 1F1 1B1 1SEND_B1 1B0 1SEND_B0 1U\n");
  // I sends the gradient back; W sends nothing.
  EXPECT_EQ(lower(Schedule::parse("0F0 0I0 0W0 0U\n1F0 1I0 1W0 1U")).to_text(),
            "d0: 0F0 0SEND_F0 0RECV_B0 0I0 0W0 0U\n"
            "d1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0 1U\n");
  // Stages on one device still exchange through SEND/RECV pairs.
  EXPECT_EQ(lower(Schedule::parse("d0: 0F0 1F0 1B0 0B0 0U 1U")).to_text(),
            "d0: 0F0 0SEND_F0 1RECV_F0 1F0 1B0 1SEND_B0 0RECV_B0 0B0 0U 1U\n");
}

TEST(Lowering, RoutesDecideWhatComesBack) {
  const Schedule s = Schedule::parse("0F0 0H0 0B0 0U\n1F0 1H0 1B0 1U");
  Lowering pairwise;
  pairwise.sends_back = {ActionKind::Head};
  EXPECT_EQ(lower(s, pairwise).to_text(),
            "d0: 0F0 0SEND_F0 0H0 0RECV_H0 0B0 0U\nd1: 1RECV_F0 1F0 1H0 1SEND_H0 1B0 1U\n");
  Lowering nwise;
  nwise.sends_back = {ActionKind::Head, ActionKind::Backward};
  EXPECT_EQ(lower(s, nwise).device(0)[3], (Action{0, ActionKind::RecvH, 0}));
  EXPECT_EQ(lower(s, nwise).device(0)[4], (Action{0, ActionKind::RecvB, 0}));
  Lowering local;
  local.sends_back = {};
  EXPECT_EQ(lower(s, local).to_text(), "d0: 0F0 0SEND_F0 0H0 0B0 0U\nd1: 1RECV_F0 1F0 1H0 1B0 1U\n");
}

TEST(ScheduleIr, ValidatorChecksPlacementAndTheSplitBackward) {
  EXPECT_NE(validation_error("d0: 0F0 0B0 0U\nd1: 0F1 0B1").find("stage 0 also has actions on device d0"),
            std::string::npos);
  EXPECT_NE(validation_error("0F0 0W0 0I0 0U").find("'0W0' on device d0: it runs before 0I0 (W follows I)"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0I0 0U").find("never completes on stage 0"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0I0 0B0 0W0 0U").find("a micro-batch takes B, or I then W"), std::string::npos);
  EXPECT_NO_THROW(validate_schedule(Schedule::parse("0F0 0I0 0W0 0U\n1F0 1I0 1W0 1U")));
}

TEST(ScheduleIr, ValidatorChecksMessages) {
  // A send of a result not computed yet; a receive after its consumer; unmatched pairs.
  EXPECT_NE(validation_error("0SEND_F0 0F0\n1RECV_F0 1F0").find("not computed before it"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0SEND_F0\n1F0 1RECV_F0").find("after the action that needs it"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0SEND_F0\n1F0").find("no device receives this message"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0SEND_F0 0F1\n1RECV_F0 1F0 1F1")
                .find("stage 0 sends the output of other micro-batches to stage 1 but not of this one"),
            std::string::npos);
  // A collective needs every replica of the stage, each time.
  EXPECT_NE(validation_error("0F0 0B0 0ALLREDUCE 0U\n1F1 1B1 1U", 2).find("stage 1 runs 0 ALLREDUCE and stage 0, of its collective group, 1"),
            std::string::npos);
  EXPECT_EQ(validation_error("0F0 0B0 0ALLREDUCE 0U\n1F1 1B1 1ALLREDUCE 1U", 2), "");
}

/// `text` (with its messages), its ALLREDUCE one collective of every stage (a global clip,
/// a tie).
std::string model_wide_error(const std::string& text) {
  return testing::user_error([&] {
    Schedule s = Schedule::parse(text);
    s.set_collective_scope(CollectiveScope::Model);
    validate_schedule(s);
  });
}

TEST(ScheduleIr, ADeviceJoinsAModelWideRoundOnceForAllItsStages) {
  // Device 0 runs stages 0 and 2: it joins at 0ALLREDUCE, and 2ALLREDUCE takes its result.
  // (Counting stages, device 0 would wait at 0ALLREDUCE for its own 2ALLREDUCE: deadlock.)
  const std::string v =
      "d0: 0F0 0SEND_F0 2RECV_F0 2F0 2B0 2SEND_B0 0RECV_B0 0B0 0ALLREDUCE 2ALLREDUCE 0U 2U\n"
      "d1: 1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0 1ALLREDUCE 1U";
  EXPECT_EQ(model_wide_error(v), "");
  Schedule s = Schedule::parse(v);
  s.set_collective_scope(CollectiveScope::Model);
  const std::vector<bool> joins = collective_arrivals(s, 0);
  EXPECT_EQ(std::count(joins.begin(), joins.end(), true), 1);
  EXPECT_TRUE(joins[8]);
  EXPECT_TRUE(collective_arrivals(s, 1)[6]);
  EXPECT_EQ(collective_devices(s), (std::map<int, int>{{0, 2}}));
  // A gradient made after the device joined would be missing from the sum.
  EXPECT_NE(model_wide_error("d0: 0F0 0SEND_F0 1RECV_F0 1F0 1I0 1SEND_B0 0RECV_B0 0B0 0ALLREDUCE 1W0 1ALLREDUCE 0U 1U")
                .find("1W0 makes a gradient of stage 1 after its device joined all-reduce round 1"),
            std::string::npos);
}

TEST(ScheduleIr, CsvAsTorchPipeliningWritesIt) {
  // A row per rank, an action per cell, empty cells for idle steps.
  const Schedule csv = Schedule::parse_csv("0F0,0F1,,0B1,0B0,0U\n,1F0,1F1,1B1,1B0,1U\n");
  EXPECT_EQ(csv, schedules::gpipe(2, 2));
  EXPECT_NE(testing::user_error([] { Schedule::parse_csv("0F0,0Q1\n", "x.csv"); }).find("x.csv:1:5: bad action '0Q1'"),
            std::string::npos);
}

TEST(ScheduleIr, WindowMarksTheAction) {
  const Schedule s = schedules::one_f_one_b(2, 8);
  EXPECT_EQ(s.window(0, 6), "d0: ... 0B0 0U 0F2 0B1 0U <-- HERE 0F3 0B2 0U 0F4 ...");
  EXPECT_EQ(s.window(1, 0, "<-- ERROR HERE"), "d1: 1F0 <-- ERROR HERE 1B0 1U 1F1 1B1 ...");
}

TEST(ScheduleIr, TimelineCountsDevicesAndPeakInFlight) {
  // Two stages on one device run one after the other: no bubble, and the device holds
  // both stages' micro-batch at once.
  const Timeline t = simulate_timeline(Schedule::parse("d0: 0F0 1F0 1B0 0B0 0U 1U"), CostModel::uniform(2, 1, 2));
  EXPECT_EQ(t.makespan, 6);
  EXPECT_EQ(t.bubble_fraction, 0);
  EXPECT_EQ(t.peak_in_flight, std::vector<int>{2});
  // I and W cost what the split cost model says.
  const Timeline z = simulate_timeline(Schedule::parse("0F0 0I0 0W0 0U"), CostModel::split(1, 1, 2, 3));
  EXPECT_EQ(z.makespan, 6);
}

TEST(ScheduleIr, EveryRegisteredSchemeRoundTripsThroughText) {
  for (const std::string& name : Registry<Scheme>::get().names()) {
    bool has_required = false;  // (a custom schedule's file, PipeMare's K): covered by the scheme cases
    for (const FieldInfo& f : Registry<Scheme>::get().find(name)->options()) has_required |= f.required;
    if (name == "custom" || has_required) continue;
    const auto scheme = Registry<Scheme>::get().create_default(name);
    for (const int requested : {1, 2, 4}) {
      int stages = 0;
      Schedule s;
      try {
        stages = scheme->stages(requested);
        s = with_communication(scheme->schedule(stages, std::max(stages, 4)));
      } catch (const UserError&) {
        continue;  // a scheme that cannot have this many stages (e.g. two per device at 1)
      }
      // The text form is the actions; the units' segment count is the scheme's option.
      Schedule back = Schedule::parse(s.to_text());
      back.set_segments(s.segments());
      EXPECT_EQ(back, s) << name << " at " << requested;
      EXPECT_NO_THROW(validate_schedule(s, {scheme->max_in_flight(stages)})) << name << " at " << requested;
      std::vector<int> placed = s.placement();
      EXPECT_EQ(placed, scheme->placement(stages)) << name << " at " << requested;
    }
  }
}

}  // namespace
}  // namespace pipelab::schedule_ir_test
