#pragma once
/// What `pipelab describe` reports about a model: per block its output shape, parameters and
/// forward FLOPs for one example, and per pipeline stage the totals and their balance.
#include <string>
#include <vector>

#include "core/model/flop_counter.h"
#include "core/model/meta_device.h"
#include "core/model/model.h"

namespace pipelab {

/// One live tensor (core/model/block_io.h) for one example.
struct TensorProfile {
  std::string name;
  std::vector<int64_t> shape;  ///< without the batch dimension
  int64_t bytes = 0;           ///< in the profiled dtype (float32 for features)
  bool floating = true;        ///< has a gradient (not ids or a mask)
};

/// One block of a model, measured on one example.
struct BlockProfile {
  std::string name;
  std::string io;                     ///< "(x, skip1) -> (x)"; empty for a one-tensor block
  std::vector<int64_t> output_shape;  ///< of "x", without the batch dimension
  std::vector<TensorProfile> live;    ///< what is live after the block: what a cut here sends
  int64_t parameters = 0;
  int64_t flops = 0;  ///< forward FLOPs for one example (2 x multiply-adds, core/model/flop_counter.h)
  /// Of them, those of operators that read a weight (FlopCounter::weight_flops): a backward's
  /// weight gradients (W) compute as many again, its input gradients (I) these once and the
  /// rest (operators of two activations) twice.
  int64_t weight_flops = 0;
  /// The FLOPs per operator class (FlopCounter::by_class), and the bytes the kernels that
  /// count none read and write (FlopCounter::memory_bytes), for one example in float32: what
  /// a cost model per operator class prices.
  ClassFlops class_flops{};
  ClassFlops class_calls{};  ///< per micro-batch, whatever its examples
  ClassFlops class_bytes{};  ///< what each class's products read and write (FlopCounter::operand_bytes_by_class)
  int64_t memory_bytes = 0;
  /// The forward's kernels for one micro-batch (operators that compute, counted by the
  /// FlopCounter; a backward runs about twice as many): what a launch cost multiplies.
  int64_t kernels = 0;
  /// Each parameter's elements, by its name in the block ("output.weight").
  std::vector<std::pair<std::string, int64_t>> parameter_sizes;
  /// Each parameter's shape, in parameter_sizes' order: what an optimizer keeps and computes
  /// for it may depend on more than its elements (OptimizerFactory::step_cost).
  std::vector<std::vector<int64_t>> parameter_shapes;
};

/// The blocks of one stage and their sums.
struct StageProfile {
  int first = 0, count = 0;  ///< block indices [first, first + count)
  int64_t parameters = 0, flops = 0;
};

/// Builds block after block of `def` (seeded as a run with `seed` would, one block alive at
/// a time) and runs one example of `data` through them: zeros (ids 0 for word-id inputs), in
/// eval mode, without autograd. Counts each block's FLOPs with a FlopCounter. With `meta`,
/// on the meta device (shapes only, core/model/meta_device.h): an operator without a meta
/// kernel throws c10::Error.
std::vector<BlockProfile> profile_blocks(const ModelDef& def, const DataSpec& data, uint64_t seed = 0,
                                         bool meta = false);
/// From shapes on the meta device (seconds and no memory at any size, docs/plan.md, "Profiles
/// from shapes"); measured on this CPU for a model the meta device cannot run (an operator
/// without a meta kernel, a fused RNN).
std::vector<BlockProfile> profile_blocks_from_shapes(const ModelDef& def, const DataSpec& data, uint64_t seed);
/// The same with the blocks from `build` (which keeps the meta blocks it built for a next use).
std::vector<BlockProfile> profile_blocks(const ModelDef& def, const DataSpec& data, ProfileBlocks& build);

/// Per-stage sums under `balance` (blocks per stage; must add up to blocks.size()).
std::vector<StageProfile> stage_totals(const std::vector<BlockProfile>& blocks, const std::vector<int>& balance);

/// max / mean of `values` (1 = perfectly balanced; 0 for an empty list or all zeros).
double imbalance(const std::vector<int64_t>& values);

/// The block table, then (when `stages` is not empty) the stage table headed by
/// `partition` (e.g. "2 stages, balance spectrain_2 = [2, 3]") and the max/mean imbalance.
std::string render_profile(const std::vector<BlockProfile>& blocks, const std::vector<StageProfile>& stages,
                           const std::string& partition);

/// 1234567 -> "1,234,567".
std::string with_commas(int64_t n);

}  // namespace pipelab
