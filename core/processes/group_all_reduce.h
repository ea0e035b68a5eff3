#pragma once
/// The ALLREDUCE over a process group (a stage's replicas, or every stage of the model for a
/// global clip or a tie). It gathers every rank's gradients and finishes them with the same
/// function as LocalAllReduce in one process (gradient_finish.h: sums in member order, ties,
/// clip), so a multi-process run has the simulated run's numbers bit for bit (a ring
/// all-reduce would add in another order). A rank may hold several members (a process with
/// several devices): they meet here first, on their device threads, and the last to arrive
/// brings them all to the gather. A device holding several members (an interleaved
/// pipeline's stages under a model-wide collective) arrives once, at the first of them, with
/// all of their gradients (core/schedule/dataflow.h, collective_arrivals); the others only
/// take their results.
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "core/processes/process_group.h"
#include "core/comm/collective.h"

namespace pipelab::dist {

class GroupAllReduce : public AllReduce {
 public:
  /// `plan`'s member m lives on rank `member_ranks[m]` of `group` and on device
  /// `member_devices[m]` (members may be different stages, with different parameters; a
  /// rank may hold several, and so may a device).
  GroupAllReduce(ProcessGroup& group, GradientPlan plan, std::vector<int> member_ranks,
                 std::vector<int> member_devices);
  /// Registers member `member`'s parameters: a device's first call of a round brings the
  /// gradients of its other members too.
  void add_rank(int member, std::vector<at::Tensor> params) override;
  /// Blocks until every device of this rank has arrived for the round and the gather is done.
  void sum_gradients(int member, const std::vector<at::Tensor>& params) override;

 private:
  struct Round {
    std::map<int, std::vector<at::Tensor>> flat;  ///< this rank's members' gradients, flat
    std::vector<std::vector<at::Tensor>> finished;  ///< every member's, once done
    std::set<int> devices;  ///< this rank's devices that have arrived
    int taken = 0;
    bool done = false;
  };
  /// The gather and the finish of a round whose local members all arrived.
  std::vector<std::vector<at::Tensor>> exchange(const std::map<int, std::vector<at::Tensor>>& flat);

  ProcessGroup& group_;
  GradientPlan plan_;
  std::vector<int> member_ranks_;
  std::vector<int> member_devices_;
  std::vector<int> local_;  ///< this rank's members, in plan order
  int local_devices_ = 0;   ///< the devices they are on
  std::map<int, std::vector<at::Tensor>> params_;  ///< per local member
  std::mutex mutex_;
  std::condition_variable done_;
  std::map<int64_t, Round> rounds_;
  std::map<int, int64_t> next_round_;  ///< per local member
  std::vector<std::vector<int64_t>> numels_;  ///< per member, its parameters' sizes (after the first round)
  int64_t longest_ = 0;                        ///< the most elements any rank brings
};

}  // namespace pipelab::dist
