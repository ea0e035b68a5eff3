// Devices that share a host (tools/simulate/contention.h): the slowdown of compute while
// other devices compute, by hand on a timeline and through a replayed data-parallel step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/config/registry.h"
#include "tools/simulate/contention.h"
#include "tools/simulate/simulate.h"

namespace pipelab::contention_test {
namespace {

TimedAction at(ActionKind kind, double start, double end) {
  TimedAction x;
  x.action.kind = kind;
  x.start = start;
  x.end = end;
  return x;
}

TEST(SharedHost, BusyFactorsByHand) {
  // Device 0 computes over [0, 2), device 1 over [1, 2) and [3, 4); device 2 over [1.5, 2).
  // Two busy: 1.5x; three: 2x. Device 0: 1 s alone, 0.5 s with one other, 0.5 s with two
  // others: (1 + 0.75 + 1) / 2 = 1.375. Device 1: 0.5 s with one other, 0.5 s with two:
  // (0.75 + 1) / 1 = 1.75, then alone: 1. Device 2: all with two others: 2. A receive is
  // not compute and takes no factor.
  EventTimeline t;
  t.devices = {{at(ActionKind::Forward, 0, 2)},
               {at(ActionKind::Forward, 1, 2), at(ActionKind::RecvB, 2, 3), at(ActionKind::Backward, 3, 4)},
               {at(ActionKind::Forward, 1.5, 2)}};
  const auto f = sim::busy_factors(t, {1.0, 1.5, 2.0});
  ASSERT_EQ(f.size(), 3u);
  ASSERT_EQ(f[0].size(), 1u);
  ASSERT_EQ(f[1].size(), 2u);
  EXPECT_DOUBLE_EQ(f[0][0], 1.375);
  EXPECT_DOUBLE_EQ(f[1][0], 1.75);
  EXPECT_DOUBLE_EQ(f[1][1], 1.0);
  EXPECT_DOUBLE_EQ(f[2][0], 2.0);
  // More devices busy than the list has figures for: its last figure.
  EXPECT_DOUBLE_EQ(sim::busy_factors(t, {1.0, 1.5})[2][0], 1.5);
}

TEST(SharedHost, ReplicasBusyTogetherRunSlower) {
  // Four replicas of one stage (F 1 s, B 2 s, U 0.5 s) compute at the same times, so every
  // compute action runs 1.5x (four busy: the list's last figure), and the all-reduce between
  // (2 * 3/4 * 3 bytes at 1 byte/s plus 6 latencies of 0.1 s) does not: 4.5 + 5.1 + 0.75.
  sim::SimCosts c;
  sim::StageCosts k;
  k.seconds[ActionKind::Forward] = 1;
  k.seconds[ActionKind::Backward] = 2;
  k.seconds[ActionKind::Update] = 0.5;
  k.parameter_bytes = 3;
  c.stages.push_back(k);
  c.link.gbps = 8e-9;
  c.link.latency_us = 1e5;
  const auto dp = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load("{type: dp, replicas: 4}"), std::make_shared<ConfigSource>("t"), "scheme"));
  sim::SimOptions four;
  four.replicas = 4;
  EXPECT_NEAR(sim::simulate(*dp, 1, 1, 8, c, four).step_seconds, 3 + 5.1 + 0.5, 1e-12);
  c.busy_slowdown = {1.0, 1.2, 1.5};
  const sim::SimResult slow = sim::simulate(*dp, 1, 1, 8, c, four);
  EXPECT_NEAR(slow.step_seconds, 4.5 + 5.1 + 0.75, 1e-12);
  // One worker runs every device's actions in turn: nothing is busy together.
  four.one_worker = true;
  const double plain = [&] {
    sim::SimCosts alone = c;
    alone.busy_slowdown.clear();
    return sim::simulate(*dp, 1, 1, 8, alone, four).step_seconds;
  }();
  EXPECT_NEAR(sim::simulate(*dp, 1, 1, 8, c, four).step_seconds, plain, 1e-12);
}

TimedTransfer on_link(int from, int to, double start, double end) {
  TimedTransfer x;
  x.from = from;
  x.to = to;
  x.start = start;
  x.end = end;
  return x;
}

TEST(Contention, OverlapFactorsByHand) {
  // Device 0 computes over [0, 4) while two of its messages are on links over [1, 2) and
  // [1.5, 3): 2 s of the 4 with traffic (counted once), 1 + 0.5 x 2/4. Device 1 receives the
  // second: its action over [2, 4) overlaps it for 1 s of 2; its action over [5, 9) overlaps
  // its own copy to the host over [5, 6): 1 s of 4. A receive is not compute.
  EventTimeline t;
  t.devices = {{at(ActionKind::Forward, 0, 4)},
               {at(ActionKind::Forward, 2, 4), at(ActionKind::RecvB, 4, 5), at(ActionKind::Backward, 5, 9)}};
  t.transfers = {on_link(0, 1, 1, 2), on_link(0, 1, 1.5, 3)};
  t.copies = {on_link(1, 1, 5, 6)};
  const auto f = sim::overlap_factors(t, 1.5);
  ASSERT_EQ(f.size(), 2u);
  ASSERT_EQ(f[0].size(), 1u);
  ASSERT_EQ(f[1].size(), 2u);
  EXPECT_DOUBLE_EQ(f[0][0], 1.25);
  EXPECT_DOUBLE_EQ(f[1][0], 1.25);
  EXPECT_DOUBLE_EQ(f[1][1], 1.125);
  // Free overlap: every factor 1.
  for (const auto& row : sim::overlap_factors(t, 1.0)) {
    for (double x : row) EXPECT_EQ(x, 1.0);
  }
}

sim::SimCosts two_stages(double wire_seconds) {
  sim::SimCosts c;
  for (int s = 0; s < 2; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.activation_bytes = s == 0 ? 1 : 0;
    k.gradient_bytes = s == 1 ? 1 : 0;
    c.stages.push_back(k);
  }
  c.link.gbps = wire_seconds > 0 ? 8e-9 / wire_seconds : 0;
  return c;
}

double one_f_one_b_step(const sim::SimCosts& c, int micro_batches) {
  const auto scheme = Registry<Scheme>::get().create(ConfigNode(
      YAML::Load(fmt::format("{{type: pipedream_flush, chunks: {}}}", micro_batches)), std::make_shared<ConfigSource>("t"),
      "scheme"));
  return sim::simulate(*scheme, 2, micro_batches, 8, c, {}).step_seconds;
}

TEST(Contention, MessagesBesideComputeSlowItDown) {
  // One micro-batch: every message is on the critical path, with nothing computing beside
  // it, so the slowdown costs nothing: F 1 + wire 0.5 + F 1 + B 2 + wire 0.5 + B 2.
  sim::SimCosts c = two_stages(0.5);
  EXPECT_NEAR(one_f_one_b_step(c, 1), 7, 1e-12);
  c.link.overlap_slowdown = 1.5;
  EXPECT_NEAR(one_f_one_b_step(c, 1), 7, 1e-12);
  // Four micro-batches: stage 0 forwards while its activations travel, so the step grows,
  // by less than the slowdown itself; on an infinite link nothing is in flight.
  c.link.overlap_slowdown = 1;
  const double free_overlap = one_f_one_b_step(c, 4);
  c.link.overlap_slowdown = 1.5;
  const double slowed = one_f_one_b_step(c, 4);
  EXPECT_GT(slowed, free_overlap + 0.25);
  EXPECT_LT(slowed, free_overlap * 1.5);
  sim::SimCosts instant = two_stages(0);
  const double plain = one_f_one_b_step(instant, 4);
  instant.link.overlap_slowdown = 1.5;
  EXPECT_EQ(one_f_one_b_step(instant, 4), plain);
}

}  // namespace
}  // namespace pipelab::contention_test
