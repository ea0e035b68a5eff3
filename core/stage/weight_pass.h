#pragma once
/// The weight half (W) of a split backward (zero-bubble schedules: B = I + W, Qi et al. 2024
/// section 2) without walking the input half again.
///
/// I computes the gradients of the stage's inputs; on its way it runs every node that both
/// the inputs' and the weights' gradients pass through (a Linear's addmm, a convolution), and
/// there the gradient arriving at that node is all W needs. Before I runs, WeightPass finds,
/// for each parameter, the node where its gradient path leaves the inputs' path and hooks it
/// to keep what arrives; W then starts the engine at those nodes with those gradients, so it
/// computes only the weights' own products. torch.distributed.pipelining's
/// stage_backward_weight does the same (its "intermediates"); a W that walks the whole graph
/// again repeats I's work (on this project's MLP, a zero-bubble step cost 20% more than a
/// 1F1B step).
///
/// The kernels and their inputs are those of a whole backward, so the gradients are its bits.
/// A parameter whose path meets the inputs' path at more than one node (a weight used twice
/// before the inputs' path), or that hides inside a checkpoint, is not split: W walks the
/// graph for those alone, as before.
#include <ATen/Tensor.h>

#include <memory>
#include <vector>

namespace pipelab {

class WeightPass {
 public:
  /// Call before I: the graph of `roots` (what I starts from), whose input half ends at
  /// `inputs` (grad-requiring leaves), for the parameters `params`.
  WeightPass(const std::vector<at::Tensor>& roots, const std::vector<at::Tensor>& inputs,
             const std::vector<at::Tensor>& params);
  ~WeightPass();
  WeightPass(const WeightPass&) = delete;
  WeightPass& operator=(const WeightPass&) = delete;

  /// After I: accumulates every parameter's gradient into its .grad (`roots` and
  /// `root_grads` as I had them, for the parameters that are not split).
  void run(const std::vector<at::Tensor>& roots, const std::vector<at::Tensor>& root_grads);

  /// How many parameters W computes from the kept gradients (for tests).
  size_t split_parameters() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipelab
