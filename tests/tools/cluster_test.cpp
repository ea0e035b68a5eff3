// Cluster files and what they add to derived costs: a host time per kernel and per action
// (hand-computed), a slower link between nodes for the messages and rings that cross one
// (a replay by hand), and the shipped presets.
#include <gtest/gtest.h>

#include "core/config/registry.h"
#include "core/scheme/scheme.h"
#include "tools/simulate/cluster.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/simulate.h"

namespace pipelab::cluster_test {
namespace {

TEST(Cluster, LaunchAndActionCostsByHand) {
  // Simulate.DerivedCostsByHand's two blocks (4 and 12 us of FLOPs at 4 examples), now with
  // 10 and 30 kernels at 1 us each and 4 us per action.
  std::vector<BlockProfile> blocks(2);
  blocks[0].flops = blocks[0].weight_flops = 1000, blocks[0].output_shape = {10}, blocks[0].parameters = 100, blocks[0].kernels = 10;
  blocks[1].flops = blocks[1].weight_flops = 3000, blocks[1].output_shape = {5}, blocks[1].parameters = 50, blocks[1].kernels = 30;
  blocks[0].live = {{"x", {10}, 40, true}};
  blocks[1].live = {{"x", {5}, 20, true}};
  sim::DeviceSpec device;
  device.tflops = 1e-3;
  device.launch_us = 1;
  device.action_us = 4;
  const sim::SimCosts c = sim::derive_costs(blocks, sim::estimated_block_memory(blocks), {1, 1}, 4, device);
  // F: 4 us of FLOPs + 10 kernels + one action.
  EXPECT_NEAR(c.stages[0].seconds[ActionKind::Forward], (4 + 10 + 4) * 1e-6, 1e-15);
  // B = I + W: 2 x 12 us of FLOPs + 2 x 30 kernels + one action (half in each of I and W).
  EXPECT_NEAR(c.stages[1].seconds[ActionKind::Backward], (24 + 60 + 4) * 1e-6, 1e-15);
  EXPECT_NEAR(c.stages[1].seconds[ActionKind::BackwardInput], (12 + 30 + 2) * 1e-6, 1e-15);
  // An update: its traffic (no bandwidth given: free) and one action.
  EXPECT_NEAR(c.stages[0].seconds[ActionKind::Update], 4e-6, 1e-15);
}

std::unique_ptr<Scheme> gpipe() {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load("{type: gpipe, chunks: 2, checkpoint: never}"),
                                                   std::make_shared<ConfigSource>("t"), "scheme"));
}

/// Two stages, F = 1 s, B = 2 s, each message 0.5 byte: 0.5 s on the link within a node
/// (8e-9 Gbit/s) and 0.25 s of latency; 1 s and 0.25 s between nodes.
sim::SimCosts two_stages(int devices_per_node) {
  sim::SimCosts c;
  for (int s = 0; s < 2; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.activation_bytes = s == 0 ? 0.5 : 0;
    k.gradient_bytes = s == 1 ? 0.5 : 0;
    c.stages.push_back(k);
  }
  c.link.gbps = 8e-9;
  c.link.latency_us = 0.25e6;
  c.link.devices_per_node = devices_per_node;
  c.link.inter_gbps = 4e-9;
  c.link.inter_latency_us = 0.25e6;
  return c;
}

TEST(Cluster, MessagesBetweenNodesTakeTheSlowerLinkByHand) {
  // One node: Simulate.LinksByHand's 10.5 s. A node per device: each message occupies the
  // link 1 s. d0 F0 [0,1] F1 [1,2]; messages arrive 2.25 and 3.25; d1 F0 [2.25,3.25] F1
  // [3.25,4.25] B1 [4.25,6.25] (arrives 7.5) B0 [6.25,8.25] (link [8.25,9.25], arrives 9.5);
  // d0 B1 [7.5,9.5] B0 [9.5,11.5].
  const auto scheme = gpipe();
  EXPECT_DOUBLE_EQ(sim::simulate(*scheme, 2, 2, 1, two_stages(2), {}).makespan, 10.5);
  EXPECT_DOUBLE_EQ(sim::simulate(*scheme, 2, 2, 1, two_stages(1), {}).makespan, 11.5);
}

TEST(Cluster, PresetsLoadWithTheirRatesAndSources) {
  for (const std::string& name : sim::cluster_presets()) {
    const sim::Cluster c = sim::load_cluster(name);
    EXPECT_FALSE(c.source.empty()) << name;
    EXPECT_GT(c.device.tflops.of("float32"), 0) << name;
    EXPECT_GT(c.device.memory_gib, 0) << name;
    EXPECT_GT(c.link.gbps, 0) << name;
  }
  EXPECT_EQ(sim::cluster_presets().size(), 7u);
  EXPECT_DOUBLE_EQ(sim::load_cluster("h100_sxm").device.tflops.of("bfloat16"), 400);
  EXPECT_EQ(sim::load_cluster("v100_sxm2").device.tflops.of("bfloat16"), 0);  // no bfloat16 on a V100
  EXPECT_EQ(sim::load_cluster("h200").link.devices_per_node, 8);
  // Every preset prices by operator class (docs/simulate.md, "Presets against published
  // single-GPU throughput"); TensorFloat-32 where the GPU has it (Ampere and later).
  for (const std::string& name : sim::cluster_presets()) {
    EXPECT_TRUE(sim::load_cluster(name).device.classes.given()) << name;
    EXPECT_TRUE(sim::is_cluster_preset(name)) << name;
  }
  EXPECT_GT(sim::load_cluster("a100_sxm").device.tflops.tf32, sim::load_cluster("a100_sxm").device.tflops.float32);
  EXPECT_EQ(sim::load_cluster("v100_sxm2").device.tflops.tf32, 0);
  EXPECT_FALSE(sim::is_cluster_preset("clusters/mine.yaml"));
}

}  // namespace
}  // namespace pipelab::cluster_test
