// The planner's shortcut for whole-pipeline replicas (sim::SimOptions::one_replica): replaying
// the first replica alone, its all-reduce costed over all of them, gives every figure the
// replay of all replicas gives; where the replicas would not replay alike (a device slowed,
// one worker, a pipeline that crosses nodes where another does not), all are replayed.
#include <gtest/gtest.h>

#include "core/config/registry.h"
#include "tools/simulate/simulate.h"

namespace pipelab::one_replica_test {
namespace {

std::unique_ptr<Scheme> scheme(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

/// Stages that differ from each other in every figure the replay reads, on a link with
/// bandwidth and latency.
sim::SimCosts uneven(int stages) {
  sim::SimCosts c;
  for (int s = 0; s < stages; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1 + 0.25 * s;
    k.seconds[ActionKind::Backward] = 2 + 0.5 * (s % 2);
    k.seconds[ActionKind::Update] = 0.3;
    k.activation_bytes = s + 1 < stages ? 0.4 : 0;
    k.gradient_bytes = s > 0 ? 0.4 : 0;
    k.retained_bytes = 100 + 10 * s;
    k.backward_input_kept_bytes = 30;
    k.transient_bytes[ActionKind::Backward] = 7 + s;
    k.parameter_bytes = 2 + s;
    k.optimizer_bytes = 4;
    c.stages.push_back(k);
  }
  c.link.gbps = 8e-9;  // 1 byte/s
  c.link.latency_us = 5e4;
  return c;
}

void expect_same(const sim::SimResult& one, const sim::SimResult& all, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_NEAR(one.step_seconds, all.step_seconds, 1e-9 * all.step_seconds);
  EXPECT_NEAR(one.samples_per_second, all.samples_per_second, 1e-9 * all.samples_per_second);
  EXPECT_NEAR(one.bubble, all.bubble, 1e-12);
  EXPECT_NEAR(one.bytes_per_step, all.bytes_per_step, 1e-9 * std::max(1.0, all.bytes_per_step));
  EXPECT_EQ(one.devices, all.devices);
  ASSERT_EQ(one.peak_bytes.size(), all.peak_bytes.size());
  for (size_t d = 0; d < all.peak_bytes.size(); ++d) {
    EXPECT_NEAR(one.peak_bytes[d], all.peak_bytes[d], 1e-9) << "device " << d;
    EXPECT_NEAR(one.peak_activation_bytes[d], all.peak_activation_bytes[d], 1e-9) << "device " << d;
    EXPECT_DOUBLE_EQ(one.static_bytes[d], all.static_bytes[d]) << "device " << d;
    EXPECT_DOUBLE_EQ(one.gradient_bytes[d], all.gradient_bytes[d]) << "device " << d;
    EXPECT_NEAR(one.busy[d], all.busy[d], 1e-9) << "device " << d;
  }
}

struct Case {
  const char* yaml;
  int stages, units, replicas;
};

TEST(OneReplica, EveryFigureAsTheReplayOfAllReplicas) {
  const Case cases[] = {
      {"{type: gpipe, chunks: 4, checkpoint: never}", 4, 4, 2},
      {"{type: pipedream_flush, chunks: 6}", 4, 6, 4},
      {"{type: zb_h1, chunks: 6}", 3, 6, 3},
      {"{type: interleaved_1f1b, virtual_stages: 2, chunks: 4}", 4, 4, 2},
      {"{type: zbv, chunks: 4}", 4, 4, 2},
      {"{type: pipedream_2bw, micro_batches: 2}", 3, 4, 2},
  };
  for (const Case& k : cases) {
    const auto s = scheme(k.yaml);
    sim::SimOptions all;
    all.replicas = k.replicas;
    sim::SimOptions one = all;
    one.one_replica = true;
    const sim::SimCosts c = uneven(k.stages);
    const sim::SimResult full = sim::simulate(*s, k.stages, k.units, 8, c, all);
    const sim::SimResult first = sim::simulate(*s, k.stages, k.units, 8, c, one);
    expect_same(first, full, k.yaml);
    // It replayed the first replica's devices alone.
    EXPECT_EQ(first.timeline.devices.size() * static_cast<size_t>(k.replicas), full.timeline.devices.size()) << k.yaml;
    // On nodes that each hold a whole replica, with a slower link between them, too.
    sim::SimCosts nodes = c;
    nodes.link.devices_per_node = full.devices / k.replicas;
    nodes.link.inter_gbps = 4e-9;
    nodes.link.inter_latency_us = 2e5;
    expect_same(sim::simulate(*s, k.stages, k.units, 8, nodes, one),
                sim::simulate(*s, k.stages, k.units, 8, nodes, all), std::string(k.yaml) + " on nodes");
  }
}

TEST(OneReplica, ReplicasThatWouldDifferAreAllReplayed) {
  // 2 stages per replica, 3 devices per node: the first replica lies within node 0, the
  // second crosses from node 0 to node 1 and pays the slower link. Its figures are the
  // replay of both, which the first replica's alone would miss.
  const auto s = scheme("{type: gpipe, chunks: 2, checkpoint: never}");
  sim::SimCosts c = uneven(2);
  c.link.devices_per_node = 3;
  c.link.inter_gbps = 8e-10;
  c.link.inter_latency_us = 1e6;
  sim::SimOptions all;
  all.replicas = 2;
  sim::SimOptions one = all;
  one.one_replica = true;
  const sim::SimResult full = sim::simulate(*s, 2, 2, 8, c, all);
  const sim::SimResult first = sim::simulate(*s, 2, 2, 8, c, one);
  EXPECT_EQ(first.timeline.devices.size(), 4u);
  expect_same(first, full, "across nodes");
  c.link.devices_per_node = 0;
  EXPECT_LT(sim::simulate(*s, 2, 2, 8, c, all).step_seconds, full.step_seconds);  // the slow link shows
  // A slowed device, and one worker for every device: all replayed.
  one.slow = {{3, 2.0}};
  EXPECT_EQ(sim::simulate(*s, 2, 2, 8, c, one).timeline.devices.size(), 4u);
  one.slow.clear();
  one.one_worker = true;
  EXPECT_EQ(sim::simulate(*s, 2, 2, 8, c, one).timeline.devices.size(), 4u);
}

}  // namespace
}  // namespace pipelab::one_replica_test
