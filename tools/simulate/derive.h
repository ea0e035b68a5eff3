#pragma once
/// Costs for devices that are not here: each block's forward FLOPs and parameters (from
/// `pipelab describe`'s profile) and the bytes it keeps for its backward, over a device spec.
/// A roofline per operator class where the device has class rates (every preset does:
/// tools/simulate/class_rates.h), else one per block: an action takes the longer of its FLOPs
/// at the device's rate and its memory traffic at the device's bandwidth.
#include <string>
#include <vector>

#include "core/optim/optimizer.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/block_times.h"
#include "tools/simulate/class_rates.h"
#include "tools/simulate/costs.h"

namespace pipelab::sim {

struct DeviceSpec {
  double tflops = 0;         ///< achieved dense FLOP/s, in 10^12 (not the datasheet peak)
  /// Convolutions' rate where it is another (TensorFloat-32 under float32: the cluster's
  /// tflops.tf32), in 10^12 FLOP/s; 0: tflops. Used with class rates only.
  double convolution_tflops = 0;
  /// The optimizer's matrix products' rate (basis rotation's), in 10^12 FLOP/s: the weights'
  /// precision's, float32 under autocast (the cluster's tflops.float32); 0: tflops.
  double update_tflops = 0;
  double memory_gbs = 0;     ///< memory bandwidth, GB/s (0: traffic is free)
  LinkSpec link;
  double dtype_bytes = 4;    ///< bytes per element of activations (the compute dtype's)
  /// Bytes per element of weights, their gradients and optimizer state: float32 master weights
  /// under mixed precision (run.amp), 8 with run.dtype: float64.
  double weight_bytes = 4;
  double optimizer_states = 1;  ///< state tensors per parameter (SGD momentum 1, Adam 2)
  /// The autocast dtype of run.amp as c10 names it ("BFloat16", "Half"); empty: none. A
  /// profile measured under it gives the run's own bytes (BlockMemory::precision).
  std::string autocast;
  /// Host time per kernel (the dispatcher, the launch): a forward pays it per kernel of its
  /// blocks, a backward twice that many. 0: kernels are free (the roofline alone).
  double launch_us = 0;
  /// Host time per action (pipelab's own work around a forward, backward or update).
  double action_us = 0;
  /// Rates per operator class (a cluster file's device.classes); not given: one roofline per block.
  ClassRates classes;
};

/// Per block, bytes one example keeps from its forward until its backward (measured or
/// estimated), at 4 bytes per element.
struct BlockMemory {
  std::vector<double> retained_per_example;
  bool measured = false;  ///< by LibTorch's allocator (else: twice the block's output)
  /// Per block, bytes (float32), how far its forward and its backward raise the level they
  /// start at, as a line in the micro-batch's examples: the forward's temporaries and what it
  /// keeps; the backward's temporaries and the input gradient it makes, less what it frees.
  /// Empty when not measured (then no transients are costed).
  std::vector<Affine> forward_rise, backward_rise;
  /// Per block, bytes (float32) a split backward's I keeps until its W (the gradients W starts
  /// from), as a line in the examples. Empty when not measured.
  std::vector<Affine> input_backward_kept;
  /// Per block, bytes (float32): how far a split backward's I and its W raise the level they
  /// start at, as lines in the examples. Empty when not measured (then a whole B's).
  std::vector<Affine> input_backward_rise, weight_backward_rise;
  /// Per block, bytes (float32) a step of the run's optimizer on its parameters allocates
  /// and frees (per-tensor temporaries; the state it keeps is static). Empty when not measured.
  std::vector<double> update_rise;
  /// Per block, what the run's optimizer keeps and computes for its parameters
  /// (OptimizerFactory::step_cost, summed; optimizer_step_costs): state elements, the FLOPs
  /// of a step's matrix products and the kernels it launches beyond an element-wise pass.
  /// Empty: device.optimizer_states copies of the weights, no products, no kernels.
  std::vector<double> optimizer_state, update_flops, update_kernels;
  /// Per block, bytes each forward keeps whatever its examples: measured under autocast, the
  /// casts of the weights its matrix products read. Empty when measured without autocast.
  std::vector<double> retained_fixed;
  /// Per block, bytes per example of the floating tensors live after it (what a cut there
  /// sends forward, and its gradients back), in `precision`: under autocast a language
  /// model's residual stream stays float32 where a Linear's output is bfloat16, which the
  /// profile's float32 shapes cannot tell. Empty when not measured.
  std::vector<double> cut_per_example;
  /// The dtype every figure here was measured in: "Float" (float32, scaled to the run's dtype
  /// where it differs), or the autocast dtype the forwards ran under ("BFloat16", "Half"),
  /// whose figures are the run's own bytes.
  std::string precision = "Float";
};

/// BlockMemory::optimizer_state and update_flops of `blocks` under `optimizer`, each parameter
/// named as a stage names it ("<block>.<parameter>").
void optimizer_step_costs(const std::vector<BlockProfile>& blocks, const OptimizerFactory& optimizer,
                          BlockMemory& memory);

/// Costs of `balance` (blocks per stage) for micro-batches of `examples` examples. With
/// `times` (each block timed on this machine), its seconds replace the roofline's: a whole
/// backward's and a split one's I and W as timed (the first stage's I is nothing, its W the
/// whole backward); without, a backward's time is split evenly between I and W.
SimCosts derive_costs(const std::vector<BlockProfile>& blocks, const BlockMemory& memory, const std::vector<int>& balance,
                      double examples, const DeviceSpec& device, const BlockTimes* times = nullptr);

/// The estimate used when nothing was measured: twice each block's output (its output and
/// one intermediate of the same size), float32.
BlockMemory estimated_block_memory(const std::vector<BlockProfile>& blocks);

}  // namespace pipelab::sim
