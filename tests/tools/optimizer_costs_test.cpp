// What the simulator knows of an optimizer (OptimizerFactory::step_cost, derive.h's
// optimizer_step_costs): basis rotation's covariances, bases and products by hand, Muon's
// Newton-Schulz products and its momentum, the
// parameters it does not rotate at its fallback's price, an element-wise optimizer as copies
// of the weights; and a stage's state bytes and update time from them (its products at the
// device's rate, its kernels at the launch cost).
#include <gtest/gtest.h>

#include "core/config/registry.h"
#include "tools/simulate/derive.h"

namespace pipelab::optimizer_costs_test {
namespace {

std::shared_ptr<const OptimizerFactory> factory(const std::string& yaml) {
  return Registry<OptimizerFactory>::get().create(
      ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("opt.yaml"), "optimizer"));
}

TEST(OptimizerCosts, BasisRotationByHand) {
  const auto rotation = factory("{type: basis_rotation, precondition_frequency: 10}");
  // A rotated 6 x 4 matrix, both sides, bases from covariances: the two moments (2 x 24), a
  // covariance and a basis per side (2 x 36 + 2 x 16). Each step rotates the gradient and the
  // first moment in and the direction out and adds the covariance, 4 x 2 x 24 x n a side
  // (n = 6, 4); each refresh (every 10th) 2 x 2 n^3 + 8/3 n^3 a side.
  const StepCost c = rotation->step_cost("layer0.attention.q.weight", {6, 4});
  EXPECT_DOUBLE_EQ(c.state_elements, 48 + 104);
  EXPECT_NEAR(c.flops, 192 * 10 + (4 * 216 + 8.0 / 3 * 216) / 10 + (4 * 64 + 8.0 / 3 * 64) / 10, 1e-9);
  // Per side a covariance's product and average and three rotations; a refresh's 3 + 8 a side.
  EXPECT_NEAR(c.kernels, 2 * 5 + (3 + 2 * 8) / 10.0, 1e-12);
  // One side (the shorter, 4), bases from the momentum: no covariances.
  const auto uni = factory("{type: basis_rotation, precondition_frequency: 10, rotation_geometry: uni, "
                           "approx_source: \"1st\"}");
  const StepCost u = uni->step_cost("layer0.ff.0.weight", {6, 4});
  EXPECT_DOUBLE_EQ(u.state_elements, 48 + 16);
  EXPECT_NEAR(u.flops, 3 * 2 * 24 * 4 + (2 * 2 * 24 * 4 + 8.0 / 3 * 64) / 10, 1e-9);
  // What it does not rotate (a name outside `rotate`, a vector) goes to its fallback, AdamW:
  // two copies, no products.
  for (const auto& [name, shape] : {std::pair<std::string, std::vector<int64_t>>{"embeddings.table", {6, 4}},
                                    {"layer0.attention.q.bias", {6}}}) {
    const StepCost f = rotation->step_cost(name, shape);
    const double n = shape.size() == 2 ? 24 : 6;
    EXPECT_DOUBLE_EQ(f.state_elements, 2 * n) << name;
    EXPECT_EQ(f.flops, 0) << name;
  }
  EXPECT_DOUBLE_EQ(factory("{type: sgd, lr: 0.1, momentum: 0.9}")->step_cost("w", {6, 4}).state_elements, 24);
  EXPECT_DOUBLE_EQ(factory("{type: sgd, lr: 0.1}")->step_cost("w", {6, 4}).state_elements, 0);
}

TEST(OptimizerCosts, MuonByHand) {
  const auto muon = factory("{type: muon, lr: 0.02, ns_steps: 5, fallback: {type: adamw, lr: 3.0e-4}}");
  // A 6 x 4 matrix: its momentum buffer (24), and five Newton-Schulz iterations on the wide
  // way round (m = 4, n = 6): 2 m^2 n for X X^T, 2 m^3 for the polynomial, 2 m^2 n for its
  // product with X; the copy, norm, clamp and division, then three products an iteration.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, 4}, std::vector<int64_t>{4, 6}}) {
    const StepCost c = muon->step_cost("layer0.ff.0.weight", shape);
    EXPECT_DOUBLE_EQ(c.state_elements, 24);
    EXPECT_DOUBLE_EQ(c.flops, 5 * (2 * 16 * 6 + 2 * 64 + 2 * 16 * 6));
    EXPECT_DOUBLE_EQ(c.kernels, 4 + 3 * 5);
  }
  // A vector goes to the fallback (AdamW: two copies, no products).
  const StepCost bias = muon->step_cost("layer0.ff.0.bias", {6});
  EXPECT_DOUBLE_EQ(bias.state_elements, 12);
  EXPECT_EQ(bias.flops, 0);
}

TEST(OptimizerCosts, AStagesStateAndUpdateComeFromItsParameters) {
  // One block with a rotated 6 x 4 matrix and a bias of 6: state 152 + 12 elements.
  BlockProfile b;
  b.name = "layer0";
  b.parameters = 30;
  b.output_shape = {1};
  b.live = {{"x", {1}, 4, true}};
  b.parameter_sizes = {{"attention.q.weight", 24}, {"attention.q.bias", 6}};
  b.parameter_shapes = {{6, 4}, {6}};
  sim::BlockMemory memory = sim::estimated_block_memory({b});
  const auto rotation = factory("{type: basis_rotation, precondition_frequency: 10}");
  sim::optimizer_step_costs({b}, *rotation, memory);
  ASSERT_EQ(memory.optimizer_state.size(), 1u);
  EXPECT_DOUBLE_EQ(memory.optimizer_state[0], 152 + 12);
  sim::DeviceSpec device;
  device.tflops = 1e-6;  // 1 MFLOP/s
  device.memory_gbs = 1e-6;  // 1000 bytes/s
  device.launch_us = 1e6;    // a second a kernel
  const sim::SimCosts c = sim::derive_costs({b}, memory, {1}, 1, device);
  const sim::StageCosts& k = c.stages[0];
  EXPECT_DOUBLE_EQ(k.optimizer_bytes, 164 * 4);
  // Read and write the weights and read the gradient, read and write the state; the products
  // at the device's rate.
  EXPECT_NEAR(k.seconds[ActionKind::Update],
              (3 * 30 * 4 + 2 * 164 * 4) / 1000.0 + memory.update_flops[0] / 1e6 + memory.update_kernels[0], 1e-9);
  EXPECT_NEAR(memory.update_kernels[0], 2 * 5 + 1.9, 1e-12);
}

}  // namespace
}  // namespace pipelab::optimizer_costs_test
