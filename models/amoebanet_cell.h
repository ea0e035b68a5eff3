#pragma once
/// AmoebaNet-D's cells as torchgpipe's benchmark builds them (`benchmarks/models/amoebanet`:
/// genotype.py, operations.py; docs/schemes.md, "torchgpipe benchmarks").
///
/// A cell reads two states, the previous cell's output s1 and the one before it s2, and
/// passes on its own output together with s1, as a pair, as torchgpipe's cells do. In the
/// model's block list (core/model/block_io.h) they are the live tensors "x" (s1) and "prev"
/// (s2): every cell reads (x, prev) and writes (x, prev), so a stage boundary carries both,
/// exactly what torchgpipe's carry. The first cell reads the stem's single tensor as both.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <vector>

namespace pipelab::models {

/// The shape of one state of one example.
struct CellState {
  int64_t channels = 0, height = 0, width = 0;
};

/// Everything a cell needs to build itself.
struct CellSpec {
  CellState s1, s2;      ///< the states read: previous output, and the one before it
  int64_t channels = 0;  ///< channels of each intermediate state
  bool reduction = false, reduction_prev = false;
  bool avg_pool_quirk = false;  ///< torchgpipe's max_pool_3x3 is an average pool
  /// The shape of the cell's output (the first state it passes on).
  CellState output() const;
};

/// One normal or reduction cell: s1 and s2 are brought to `channels` (1x1 relu-conv-bn; a
/// factorized reduction for s2 after a reduction cell), five nodes each add two operations
/// of earlier states, and the listed states are concatenated. Returns {output, s1}.
class CellImpl : public torch::nn::Module {
 public:
  explicit CellImpl(const CellSpec& spec);
  std::vector<torch::Tensor> forward(const torch::Tensor& s1, const torch::Tensor& s2);

 private:
  CellSpec spec_;
  torch::nn::AnyModule reduce1_, reduce2_;
  std::vector<torch::nn::AnyModule> operations_;
  std::vector<int> inputs_;  ///< the state each operation reads
  std::vector<int> concat_;  ///< the states concatenated into the output
};
TORCH_MODULE(Cell);

/// The first cell: reads the stem's one tensor as both states (the same parameters, names
/// and numbers as a Cell given it twice).
class FirstCellImpl : public CellImpl {
 public:
  using CellImpl::CellImpl;
  std::vector<torch::Tensor> forward(const torch::Tensor& x) { return CellImpl::forward(x, x); }
};
TORCH_MODULE(FirstCell);

}  // namespace pipelab::models
