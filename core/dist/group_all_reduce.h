#pragma once
/// The data-parallel all-reduce over a process group (one replica per rank). It gathers
/// every rank's gradients and adds them up in rank order, exactly as LocalAllReduce does
/// in one process, so that a multi-process dp run has the simulated run's numbers bit for
/// bit (a ring all-reduce would add in another order).
#include "core/dist/process_group.h"
#include "core/exec/collective.h"

namespace pipelab::dist {

class GroupAllReduce : public AllReduce {
 public:
  explicit GroupAllReduce(ProcessGroup& group) : group_(group) {}
  void sum_gradients(int rank, const std::vector<at::Tensor>& params) override;

 private:
  ProcessGroup& group_;
};

}  // namespace pipelab::dist
