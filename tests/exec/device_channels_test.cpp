// NCCL channels carry no tags: ProcessWorld picks them only when every edge between two
// ranks is received in the order it is sent (exec/device_channels.h).
#include <gtest/gtest.h>

#include "core/exec/device_channels.h"
#include "core/schedule/lower.h"

namespace pipelab::device_channels_test {
namespace {

int own_rank(int stage) { return stage; }
int one_rank(int) { return 0; }

TEST(DeviceChannels, GpipeIsReceivedInTheOrderItIsSent) {
  const Schedule s = with_communication(Schedule::parse("d0: 0F0 0F1 0B0 0B1\nd1: 1F0 1F1 1B0 1B1\n"));
  EXPECT_EQ(untagged_order_problem(s, own_rank), "");
}

TEST(DeviceChannels, AReceiverThatTakesMessagesOutOfOrderIsNamed) {
  // Stage 1 takes micro-batch 1's activation first: NCCL would hand it micro-batch 0's.
  const Schedule s = with_communication(Schedule::parse("d0: 0F0 0F1 0B0 0B1\nd1: 1F1 1F0 1B1 1B0\n"));
  EXPECT_EQ(untagged_order_problem(s, own_rank), "stage 0 sends F0 as its message 1 to stage 1, which takes F1 there");
  // On one rank the messages go through mailboxes, which have tags.
  EXPECT_EQ(untagged_order_problem(s, one_rank), "");
}

}  // namespace
}  // namespace pipelab::device_channels_test
