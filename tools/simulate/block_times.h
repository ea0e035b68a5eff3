#pragma once
/// Each block's forward and backward timed on this machine: the costs of a plan for the
/// devices here (the threaded executor's, one device per thread), where a roofline of
/// FLOP/s and bandwidth is too coarse. A block is timed at up to four micro-batch sizes
/// from the smallest a plan tries to the whole mini-batch (geometrically spaced) and costed
/// along the lines between them: a block's time is far from affine in its examples (a half
/// width MobileNetV2 here: 4 examples 30 ms, 32 examples 175 ms, 64 examples 250 ms, where the
/// line through the ends says 133 ms at 32), and small micro-batches cost what they do here.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/model/block_io.h"
#include "core/model/model.h"
#include "core/optim/optimizer.h"
#include "tools/simulate/size_curve.h"

namespace pipelab::sim {

/// The inputs of `block` in `live`, cut from the graph (a stage receives them so): floating
/// ones take a gradient, as a stage's received activations do.
Tensors detached_inputs(const LiveSet& live, const Block& block);

/// Per block, its forward, its backward (input and weight gradients together), the two
/// halves of a split backward (I and W, as the executor runs them: on this machine I + W
/// exceeds B, most on blocks with normalisations, whose one backward kernel I and W each
/// run), and its optimizer step.
struct BlockTimes {
  std::vector<SizeCurve> forward, backward, input_backward, weight_backward;
  std::vector<double> update;
  /// Seconds to copy each block's parameters once (into a buffer of their size): what a
  /// weight version stashed, swapped in or put back costs (Scheme::weight_work).
  std::vector<double> weight_copy;
  /// An all-reduce of the timed gradients over two members through this host's memory, in
  /// Gbit/s of each member's ring bytes (LinkSpec::reduce_gbps); 0 without gradients.
  double reduce_gbps = 0;
  /// [k - 2]: how much longer compute takes while k devices of this host compute at once,
  /// by micro-batch size. The devices here are threads of one process: busy together, they
  /// share the caches, the memory bandwidth and the allocator that each block was timed
  /// alone with (a half-width MobileNetV2 on two threads: 1.00x to 1.49x at 4 examples from
  /// run to run, 1.00x to 1.09x at 64).
  std::vector<SizeCurve> busy_slowdown;
  /// By micro-batch size, how much longer the whole model's forward and backward take run as
  /// a stage runs them (every block's forward on the last one's output, the graph kept, one
  /// backward from the loss) than its blocks timed one at a time, each on the same input
  /// again and again: each block's times above are scaled by them. On this machine a
  /// half-width MobileNetV2 at 64 examples took 1.25x its blocks' forward and 1.19x their
  /// backward so, and its runs 1.14x and 1.10x. The chain holds the whole model's
  /// activations at each timed size, the largest the mini-batch, as a one-device run would.
  SizeCurve chain_forward, chain_backward;
  /// busy_slowdown at micro-batches of `examples`: [k - 1] for k busy devices, [0] = 1.
  std::vector<double> busy_slowdown_at(double examples) const;
  int threads = 1;  ///< the intra-op threads they were timed with
  bool empty() const { return forward.empty(); }
};

/// The sizes time_blocks times at: `small`, `large` and up to two between, spaced
/// geometrically (distinct integers).
std::vector<int> timed_sizes(int small, int large);

/// An optimizer over `block`'s parameters that have gradients, each named as a stage names
/// it ("<block>.<parameter>", OptimizerFactory::make_named: basis rotation rotates by name);
/// null when none has one.
std::unique_ptr<Optimizer> block_optimizer(Block& block, const OptimizerFactory& factory);

/// Times every block of `def` (built as a run builds it, in training mode) at timed_sizes
/// with `threads` intra-op threads: each block's forward on the previous block's output, its
/// backward alone, its split backward and a step of `optimizer` on its parameters: the
/// median over `rounds` rounds, each timing every size `repeats` times (the first after a
/// warm-up), each scaled to the model run as a stage runs it (BlockTimes::chain_forward).
/// Then the slowdown of devices busy together (BlockTimes::busy_slowdown) at each size, over
/// `rounds` rounds.
BlockTimes time_blocks(const ModelDef& def, const DataSpec& data, uint64_t seed, const OptimizerFactory& optimizer,
                       int small, int large, int threads, int repeats = 3, int rounds = 3);

}  // namespace pipelab::sim
