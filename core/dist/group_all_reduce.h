#pragma once
/// The ALLREDUCE over a process group (one member per rank: a stage's replicas, or every
/// stage of the model for a global clip or a tie). It gathers every rank's gradients and
/// finishes them with the same function as LocalAllReduce in one process (gradient_finish.h:
/// sums in rank order, ties, clip), so a multi-process run has the simulated run's numbers
/// bit for bit (a ring all-reduce would add in another order).
#include "core/dist/process_group.h"
#include "core/exec/collective.h"

namespace pipelab::dist {

class GroupAllReduce : public AllReduce {
 public:
  /// `plan` has one member per rank of `group`, in rank order (members may be different
  /// stages, with different parameters).
  GroupAllReduce(ProcessGroup& group, GradientPlan plan) : group_(group), plan_(std::move(plan)) {}
  void sum_gradients(int rank, const std::vector<at::Tensor>& params) override;

 private:
  ProcessGroup& group_;
  GradientPlan plan_;
  std::vector<std::vector<int64_t>> numels_;  ///< per rank, its parameters' sizes (after the first round)
  int64_t longest_ = 0;                        ///< the most elements any rank brings
};

}  // namespace pipelab::dist
