#pragma once
/// What each block of a model costs, for cutting it into balanced stages
/// (`partition.balance: params | flops | time | memory`, core/model/partition.h). Each is
/// measured on the built blocks chained over real examples of the dataset.
#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "core/model/model.h"

namespace pipelab {

/// Parameters per block (at least 1: a parameter-free block still costs something).
std::vector<double> block_params(const std::vector<Block>& blocks);

/// `costs` with every entry at least 1% of the mean (plus 1): a block that does no counted
/// work (an activation, a pooling) still takes time, and a split must not treat it as free.
std::vector<double> with_floor(std::vector<double> costs);

/// Forward FLOPs per block for the examples `x` (core/model/flop_counter.h; evaluation
/// mode, no gradient). Blocks without counted operators get 1% of the mean, not 0.
std::vector<double> block_flops(std::vector<Block>& blocks, const at::Tensor& x);

/// Measured seconds of forward + backward per block for the examples `x` on `device` (as
/// torchgpipe's balance_by_time): the median of `repeats` timings after one warm-up, in
/// training mode, each block's input detached. The blocks are moved to `device` and back.
std::vector<double> block_seconds(std::vector<Block>& blocks, const at::Tensor& x, const c10::Device& device,
                                  int repeats = 3);

/// Bytes a block holds in training per micro-batch of `x`: its parameters three times
/// (weights, gradients, one optimizer state) plus the live tensors after it (its output and
/// any skip connection in transit), which its own backward and the next stage keep (an estimate in the spirit of torchgpipe's balance_by_size).
std::vector<double> block_memory(std::vector<Block>& blocks, const at::Tensor& x);

}  // namespace pipelab
