#pragma once
/// Each block's forward and backward timed on this machine: the costs of a plan for the
/// devices here (the threaded executor's, one device per thread), where a roofline of
/// FLOP/s and bandwidth is too coarse. A block's time is affine in its micro-batch size:
/// a fixed part (kernel launches, the dispatcher, weight traffic) and a part per example,
/// fitted to two timed sizes, so small micro-batches cost what they do here.
#include <cstdint>
#include <vector>

#include "core/model/block_io.h"
#include "core/model/model.h"
#include "core/optim/optimizer.h"

namespace pipelab::sim {

/// What one action of one block costs for `n` examples (seconds, or bytes): fixed +
/// per_example * n.
struct Affine {
  double fixed = 0, per_example = 0;
  double at(double n) const { return fixed + per_example * n; }
  /// The line through (`n1`, `y1`) and (`n2`, `y2`), n1 < n2; a slope below zero (noise on a
  /// block that takes microseconds) is a constant.
  static Affine through(double n1, double y1, double n2, double y2);
};

/// The inputs of `block` in `live`, cut from the graph (a stage receives them so): floating
/// ones take a gradient, as a stage's received activations do.
Tensors detached_inputs(const LiveSet& live, const Block& block);

/// Per block, its forward, its backward (input and weight gradients together) and its
/// optimizer step.
struct BlockTimes {
  std::vector<Affine> forward, backward;
  std::vector<double> update;
  /// An all-reduce of the timed gradients over two members through this host's memory, in
  /// Gbit/s of each member's ring bytes (LinkSpec::reduce_gbps); 0 without gradients.
  double reduce_gbps = 0;
  int threads = 1;  ///< the intra-op threads they were timed with
  bool empty() const { return forward.empty(); }
};

/// Times every block of `def` (built as a run builds it, in training mode) at `small` and
/// `large` examples with `threads` intra-op threads: each block's forward on the previous
/// block's output, its backward alone and a step of `optimizer` on its parameters: the
/// median over `rounds` rounds, each timing both sizes, of `repeats` after a warm-up.
BlockTimes time_blocks(const ModelDef& def, const DataSpec& data, uint64_t seed, const OptimizerFactory& optimizer,
                       int small, int large, int threads, int repeats = 5, int rounds = 4);

}  // namespace pipelab::sim
