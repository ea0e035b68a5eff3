// Schedules as data: golden tables (hand-written from docs/schemes.md, "Schedules"), the text
// form, the validator's rejections, and the timeline's clock cycles and bubble fraction.
#include <gtest/gtest.h>

#include "core/schedule/generators.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "tests/support/helpers.h"

namespace pipelab::schedule_test {
namespace {

Schedule golden(const std::string& name) {
  return Schedule::parse(testing::read_text(std::string(PIPELAB_TEST_GOLDEN_DIR) + "/" + name));
}

std::string validation_error(const std::string& text, const ValidateOptions& options = {}) {
  return testing::user_error([&] { validate_schedule(Schedule::parse(text), options); });
}

TEST(Schedule, GoldenTables) {
  EXPECT_EQ(schedules::naive(2, 2), golden("naive_D2_M2.txt"));
  EXPECT_EQ(schedules::gpipe(3, 4), golden("gpipe_D3_M4.txt"));
  EXPECT_EQ(schedules::one_f_one_b(4, 6), golden("one_f_one_b_D4_N6.txt"));
  EXPECT_EQ(schedules::one_f_one_b(4, 2), golden("one_f_one_b_D4_N2.txt"));
}

TEST(Schedule, TextRoundTrip) {
  const Schedule s = schedules::one_f_one_b(4, 6);
  EXPECT_EQ(Schedule::parse(s.to_text()), s);
  EXPECT_EQ(schedules::gpipe(2, 1).to_text(), "d0: 0F0 0B0 0U\nd1: 1F0 1B0 1U\n");
  // A single global order is split by stage, keeping each stage's order.
  EXPECT_EQ(Schedule::parse("0F0 1F0 1B0 0B0 1U 0U"), schedules::gpipe(2, 1));
}

TEST(Schedule, ParseErrorsNameTheToken) {
  EXPECT_NE(testing::user_error([] { Schedule::parse("0F0 0X1"); }).find("'0X1'"), std::string::npos);
  EXPECT_NE(testing::user_error([] { Schedule::parse("F0"); }).find("stage number"), std::string::npos);
  EXPECT_NE(testing::user_error([] { Schedule::parse("0U3"); }).find("no micro-batch"), std::string::npos);
  EXPECT_NE(testing::user_error([] { Schedule::parse("0F0\nd1: 1F0 0F", "my.sched"); }).find("my.sched:2:9:"),
            std::string::npos);
  EXPECT_NE(testing::user_error([] { Schedule::parse("x1: 0F0"); }).find("not a device label"), std::string::npos);
  EXPECT_NE(testing::user_error([] { Schedule::parse("d0: 0F0\nd0: 0B0"); }).find("second line"), std::string::npos);
}

TEST(Schedule, GeneratedSchedulesAreValid) {
  for (int d = 1; d <= 8; ++d) {
    for (int m = 1; m <= 9; ++m) {
      EXPECT_NO_THROW(validate_schedule(schedules::naive(d, m), {std::vector<int>(static_cast<size_t>(d), 1)}));
      EXPECT_NO_THROW(validate_schedule(schedules::gpipe(d, m)));
      std::vector<int> bound;
      for (int r = 0; r < d; ++r) bound.push_back(d - r);  // at most D - r in flight (docs/schemes.md, "1F1B")
      EXPECT_NO_THROW(validate_schedule(schedules::one_f_one_b(d, m), {bound}));
      EXPECT_NO_THROW(validate_schedule(schedules::forward_only(d, m)));
    }
  }
}

TEST(Schedule, ValidatorRejectsBackwardBeforeForward) {
  // A file's schedule: the place is file:line:column, the line quoted under it.
  std::string msg = validation_error("0B0 0F0 0U");
  EXPECT_NE(msg.find("schedule:1:1: invalid schedule: '0B0' on device d0: it runs before 0F0. Fix: move it after "
                     "0F0.\n  1 | 0B0 0F0 0U\n      ^^^"),
            std::string::npos)
      << msg;
  // A generated schedule: the window of the device's actions marks the culprit.
  Schedule generated(1);
  generated.add(0, Action::B(0, 0));
  generated.add(0, Action::F(0, 0));
  generated.add(0, Action::U(0));
  msg = testing::user_error([&] { validate_schedule(generated); });
  EXPECT_NE(msg.find("device d0, action 0 (0B0): it runs before 0F0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("d0: 0B0 <-- HERE 0F0 0U"), std::string::npos) << msg;
}

TEST(Schedule, ValidatorRejectsDeadlock) {
  // Stage 0 wants micro-batch 0's gradient before sending micro-batch 1 on; stage 1 wants
  // micro-batch 1 before it goes backward on micro-batch 0. Every device's stop is listed.
  const std::string msg = validation_error("0F0 0B0 0F1 0B1 0U\n1F0 1F1 1B1 1B0 1U");
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
  EXPECT_NE(msg.find("device d0 stops at '0B0' at schedule:1:5, waiting for 1SEND_B0:\n    1 | 0F0 0B0"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("device d1 stops at '1F1' at schedule:2:5, waiting for 0SEND_F1"), std::string::npos) << msg;
}

TEST(Schedule, ValidatorRejectsMissingMicroBatch) {
  EXPECT_NE(validation_error("0F0 0F1 0B1 0B0 0U\n1F0 1B0 1U").find("stage 1 never runs micro-batch 1"),
            std::string::npos);
  EXPECT_NE(validation_error("0F0 0F1 0B0 0U").find("micro-batch 1 never completes on stage 0. Fix: add 0B1"),
            std::string::npos);
}

TEST(Schedule, ValidatorRejectsRepeatsUnappliedGradientsAndTooManyInFlight) {
  EXPECT_NE(validation_error("0F0 0F0 0B0 0U").find("twice"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0B0").find("never applied"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0F1 0B0 0B1 0U", {{1}}).find("2 micro-batches in flight"), std::string::npos);
  EXPECT_NE(validation_error("0F0 0U").find("forward-only schedule contains 0U"), std::string::npos);
}

TEST(Timeline, GpipeClockCyclesFollowF6) {
  // torchgpipe's cases (M, D); with F = B = 1, forward (i, r) runs in cycle i + r, and the
  // backward mirrors it: cycle (M + D - 1) + (M - 1 - i) + (D - 1 - r).
  for (auto [m, d] : std::vector<std::pair<int, int>>{{1, 1}, {1, 3}, {3, 1}, {3, 3}, {4, 2}, {8, 4}}) {
    const Timeline t = simulate_timeline(schedules::gpipe(d, m), CostModel::uniform(d, 1, 1));
    for (int r = 0; r < d; ++r) {
      for (const TimedAction& a : t.devices[static_cast<size_t>(r)]) {
        const int i = a.action.mb;
        if (a.action.kind == ActionKind::Forward) EXPECT_EQ(a.start, i + r);
        if (a.action.kind == ActionKind::Backward) EXPECT_EQ(a.start, (m + d - 1) + (m - 1 - i) + (d - 1 - r));
      }
    }
    EXPECT_EQ(t.makespan, 2 * (m + d - 1));
  }
}

TEST(Timeline, BubbleFractions) {
  for (int d = 1; d <= 8; ++d) {
    for (int m = 1; m <= 16; ++m) {
      const double gpipe = simulate_timeline(schedules::gpipe(d, m), CostModel::uniform(d, 1, 2)).bubble_fraction;
      EXPECT_NEAR(gpipe, static_cast<double>(d - 1) / (m + d - 1), 1e-12) << d << " " << m;
      const double naive = simulate_timeline(schedules::naive(d, m), CostModel::uniform(d, 1, 1)).bubble_fraction;
      EXPECT_NEAR(naive, 1.0 - 1.0 / d, 1e-12);
    }
  }
  // 1F1B with F = B = 1 over n mini-batches: makespan 2(n + D - 1), the same bubble as GPipe.
  const Timeline t = simulate_timeline(schedules::one_f_one_b(4, 6), CostModel::uniform(4, 1, 1));
  EXPECT_EQ(t.makespan, 2 * (6 + 3));
}

TEST(Timeline, GridRendering) {
  const Timeline t = simulate_timeline(schedules::gpipe(3, 4), CostModel::uniform(3, 1, 1));
  EXPECT_EQ(render_grid(t), testing::read_text(std::string(PIPELAB_TEST_GOLDEN_DIR) + "/gpipe_D3_M4_grid.txt"));
}

TEST(Timeline, MeasuredCostsAndTransfer) {
  // Two stages, F = 2 and B = 3 on stage 0, F = 1 and B = 1 on stage 1, one micro-batch,
  // transfer 0.5: stage 1 starts at 2.5, ends its backward at 4.5; stage 0's backward
  // starts at 5 and ends at 8.
  CostModel c;
  c.seconds[ActionKind::Forward] = {2, 1};
  c.seconds[ActionKind::Backward] = {3, 1};
  c.seconds[ActionKind::Update] = {0, 0};
  c.transfer = 0.5;
  const Timeline t = simulate_timeline(schedules::naive(2, 1), c);
  EXPECT_DOUBLE_EQ(t.makespan, 8);
  EXPECT_DOUBLE_EQ(t.busy[0], 5);
  EXPECT_DOUBLE_EQ(t.busy[1], 2);
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 1 - 7.0 / 16);
}

}  // namespace
}  // namespace pipelab::schedule_test
