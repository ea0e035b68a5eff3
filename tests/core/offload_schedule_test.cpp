// The offload pass and its actions (core/schedule/offload.h; PipeOffload, arXiv 2503.01328):
// the micro-batches whose activations live longest go to the host, each reloaded `prefetch`
// compute actions ahead of its backward (a hand-derived 1F1B stage), the result lowers and
// validates, and the validator refuses every misplaced OFFLOAD or RELOAD with a fix.
#include <gtest/gtest.h>

#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/offload.h"
#include "core/schedule/validate.h"
#include "tests/support/helpers.h"

namespace pipelab::offload_schedule_test {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

OffloadPolicy policy(std::vector<bool> stages, double fraction, int prefetch) {
  OffloadPolicy p;
  p.stages = std::move(stages);
  p.fraction = fraction;
  p.prefetch = prefetch;
  return p;
}

std::string line(const Schedule& s, int d) {
  std::string out;
  for (const Action& a : s.device(d)) out += (out.empty() ? "" : " ") + a.str();
  return out;
}

TEST(OffloadPass, TheLongestLivedHalfOfA1F1BStageByHand) {
  // 1F1B, 4 stages, 8 micro-batches; stage 0 runs F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6
  // B7 U. Compute actions between each F and its B: mb0 3, mb1 4, mb2 5, mb3 6, mb4 6, mb5 5,
  // mb6 4, mb7 3. Half of 8: mb3 and mb4 (6), then mb2 and mb5 (5, the lower ids of the ties
  // first). Each OFFLOAD follows its F; each RELOAD precedes the compute action before its B.
  const Schedule program = schedules::one_f_one_b_flushed(4, 8);
  ASSERT_EQ(line(program, 0), "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7 0U");
  const Schedule s = offload(program, policy({true}, 0.5, 1));
  EXPECT_EQ(line(s, 0),
            "0F0 0F1 0F2 0OFFLOAD2 0F3 0OFFLOAD3 0B0 0F4 0OFFLOAD4 0B1 0RELOAD2 0F5 0OFFLOAD5 0B2 0RELOAD3 0F6 0B3 "
            "0RELOAD4 0F7 0RELOAD5 0B4 0B5 0B6 0B7 0U");
  EXPECT_EQ(offloaded_micro_batches(program, policy({true}, 0.5, 1), 0), (std::vector<int>{2, 3, 4, 5}));
  for (int d = 1; d < 4; ++d) EXPECT_EQ(line(s, d), line(program, d)) << "stage " << d << " does not offload";
  EXPECT_NO_THROW(validate_schedule(s));
  // Lowered, the OFFLOAD follows the F's send and the RELOAD precedes the receive in front of
  // the action it is issued before: the copy never waits behind a blocking receive.
  const Schedule lowered = offload(lower(program), policy({true}, 0.5, 1));
  EXPECT_NO_THROW(validate_schedule(lowered));
  const std::string first = line(lowered, 0);
  EXPECT_NE(first.find("0F2 0SEND_F2 0OFFLOAD2"), std::string::npos) << first;
  EXPECT_NE(first.find("0B1 0RELOAD2 0F5 0SEND_F5"), std::string::npos) << first;
  EXPECT_NE(first.find("0RELOAD5 0RECV_B4 0B4"), std::string::npos) << first;
  // The program and its lowering agree: lowering the offloaded program validates too.
  EXPECT_NO_THROW(validate_schedule(lower(s)));
}

TEST(OffloadPass, EveryStagesAnswerAtOnceIsEachStagesOwn) {
  // 1F1B on 4 stages, prefetches 0, 1 and 3: the first stage always has a micro-batch that
  // outlives them (6 compute actions between F3 and B3), the last never (B follows F).
  const Schedule program = schedules::one_f_one_b_flushed(4, 8);
  for (const int prefetch : {0, 1, 3}) {
    const OffloadPolicy every = policy({true, true, true, true}, 1.0, prefetch);
    const std::vector<bool> all = offloading_stages(program, every);
    ASSERT_EQ(all.size(), 4u);
    for (int stage = 0; stage < 4; ++stage) {
      EXPECT_EQ(all[static_cast<size_t>(stage)], !offloaded_micro_batches(program, every, stage).empty())
          << "stage " << stage << ", prefetch " << prefetch;
    }
    EXPECT_FALSE(all[3]);
    EXPECT_TRUE(all[0]);
  }
}

TEST(OffloadPass, AStageWhoseActivationsDoNotOutliveThePrefetchKeepsThem) {
  // The last stage of 1F1B runs each B right after its F: nothing to gain, nothing moved.
  const Schedule program = schedules::one_f_one_b_flushed(4, 8);
  const Schedule s = offload(program, policy({false, false, false, true}, 1.0, 0));
  EXPECT_EQ(line(s, 3), line(program, 3));
  // With no prefetch every micro-batch of stage 0 that waits at all goes, each reloaded right
  // before its backward; with all of them, the peak of stage 0 is one micro-batch's.
  const Schedule all = offload(program, policy({true}, 1.0, 0));
  EXPECT_EQ(offloaded_micro_batches(program, policy({true}, 1.0, 0), 0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NO_THROW(validate_schedule(all));
  int on_device = 0, most = 0;
  for (const Action& a : all.device(0)) {
    if (a.kind == ActionKind::Forward || a.kind == ActionKind::Reload) ++on_device;
    if (a.kind == ActionKind::Offload || a.kind == ActionKind::Backward) --on_device;
    most = std::max(most, on_device);
  }
  EXPECT_EQ(most, 1);
}

std::string refused(const std::string& text) {
  return testing::user_error([&] { validate_schedule(Schedule::parse(text, "my.sched")); });
}

TEST(OffloadPass, TheValidatorRefusesMisplacedMoves) {
  const std::string ok = "d0: 0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U";
  EXPECT_NO_THROW(validate_schedule(Schedule::parse(ok)));
  EXPECT_HAS(refused("d0: 0OFFLOAD0 0F0 0F1 0RELOAD0 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"),
             "it runs before 0F0, whose activations it moves");
  EXPECT_HAS(refused("d0: 0F0 0F1 0RELOAD0 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"), "nothing to reload: no 0OFFLOAD0");
  EXPECT_HAS(refused("d0: 0F0 0OFFLOAD0 0F1 0B0 0RELOAD0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"),
             "it reads activations still on the host");
  EXPECT_HAS(refused("d0: 0F0 0OFFLOAD0 0F1 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"), "never completes");
  EXPECT_HAS(refused("d0: 0F0 0OFFLOAD0 0OFFLOAD0 0F1 0RELOAD0 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"), "it runs twice");
  EXPECT_HAS(refused("d0: 0F0 0B0 0OFFLOAD0 0F1 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"), "already ran: nothing is kept");
  // Errors point at the action in the file.
  EXPECT_HAS(refused("d0: 0F0 0F1 0RELOAD0 0B0 0B1 0U\nd1: 1F0 1B0 1F1 1B1 1U"), "my.sched:1:");
  // torch's CSV has no such action.
  EXPECT_HAS(testing::user_error([&] { (void)Schedule::parse(ok).to_csv(); }),
             "torch's CSV has no action for 0OFFLOAD0");
}

}  // namespace
}  // namespace pipelab::offload_schedule_test
