#pragma once
/// AmoebaNet-D's cells as torchgpipe's benchmark builds them (`benchmarks/models/amoebanet`:
/// genotype.py, operations.py; docs/schemes.md §6.6).
///
/// A cell reads two states, the previous cell's output s1 and the one before it s2, and
/// passes on its own output together with s1. torchgpipe sends that pair as a tuple; a
/// pipelab block maps one tensor to one tensor (core/model/model.h), so the pair travels
/// packed: both states flattened per example and concatenated, [N, |s| + |skip|]. Each cell
/// knows the shapes of the states it reads (fixed by the input size), so it unpacks them
/// with views. Stage boundaries thus carry exactly what torchgpipe's carry; inside a stage
/// each cell pays one extra copy of its output.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <utility>
#include <vector>

namespace pipelab::models {

/// The shape of one state of one example.
struct CellState {
  int64_t channels = 0, height = 0, width = 0;
  int64_t numel() const { return channels * height * width; }
};

/// [N, |a| + |b|]: both states of each example, flattened and concatenated.
torch::Tensor pack_states(const torch::Tensor& a, const torch::Tensor& b);
/// The inverse of pack_states for states of shapes `a` and `b`.
std::pair<torch::Tensor, torch::Tensor> unpack_states(const torch::Tensor& packed, const CellState& a,
                                                      const CellState& b);

/// Everything a cell needs to build itself.
struct CellSpec {
  CellState s1, s2;      ///< the states read: previous output, and the one before it
  bool paired = true;    ///< false for the first cell, which reads the stem's single tensor as both
  int64_t channels = 0;  ///< channels of each intermediate state
  bool reduction = false, reduction_prev = false;
  bool avg_pool_quirk = false;  ///< torchgpipe's max_pool_3x3 is an average pool
  /// The shape of the cell's output (the first state it passes on).
  CellState output() const;
};

/// One normal or reduction cell: s1 and s2 are brought to `channels` (1x1 relu-conv-bn; a
/// factorized reduction for s2 after a reduction cell), five nodes each add two operations
/// of earlier states, and the listed states are concatenated. Input and output are packed
/// pairs (except the first cell's input).
class CellImpl : public torch::nn::Module {
 public:
  explicit CellImpl(const CellSpec& spec);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  CellSpec spec_;
  torch::nn::AnyModule reduce1_, reduce2_;
  std::vector<torch::nn::AnyModule> operations_;
  std::vector<int> inputs_;  ///< the state each operation reads
  std::vector<int> concat_;  ///< the states concatenated into the output
};
TORCH_MODULE(Cell);

}  // namespace pipelab::models
