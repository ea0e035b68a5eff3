#pragma once
/// The collective an ALLREDUCE joins (its stages' gradients finished together:
/// gradient_finish.h), behind one interface: in one process (the sequential and threaded
/// executors) or over a c10d process group (the distributed executor), so a scheme never
/// knows which one it runs on.
#include <ATen/Tensor.h>

#include <map>
#include <mutex>
#include <vector>

#include "core/device/streams.h"
#include "core/comm/gradient_finish.h"

namespace pipelab {

class AllReduce {
 public:
  virtual ~AllReduce() = default;
  /// Registers member `rank`'s parameters (whose .grad() an in-process collective reads); a
  /// process group needs nothing (each rank brings its own gradients).
  virtual void add_rank(int /*rank*/, std::vector<at::Tensor> /*params*/) {}
  /// Member `rank`'s gradients of this round are all queued (called after its backward, on
  /// its own thread and stream): an in-process sum on another stream waits for them.
  virtual void produced(int /*rank*/) {}
  /// Replaces the gradients of `params` (member `rank`'s) by the finished ones (the plan's
  /// sums and clip). Every member calls it once per update, after all members' backwards
  /// (the schedule's synchronized updates guarantee that).
  virtual void sum_gradients(int rank, const std::vector<at::Tensor>& params) = 0;
};

/// The members live in this process: the first caller of a round finishes every member's
/// gradients (sums in rank order, so the result does not depend on thread timing); every
/// caller then takes its own. On CUDA each member computes on a stream of its own (threaded
/// executor), so the first caller waits for every member's `produced` event, and each caller
/// waits for the result's event before copying it.
class LocalAllReduce : public AllReduce {
 public:
  explicit LocalAllReduce(GradientPlan plan)
      : plan_(std::move(plan)),
        params_(plan_.members.size()),
        rounds_(plan_.members.size(), 0),
        produced_(plan_.members.size()) {}
  /// Registers member `rank`'s parameters (whose .grad() the collective reads).
  void add_rank(int rank, std::vector<at::Tensor> params) override;
  void produced(int rank) override;
  void sum_gradients(int rank, const std::vector<at::Tensor>& params) override;

 private:
  struct Round {
    std::vector<std::vector<at::Tensor>> finished;  ///< per member
    device::Ready ready;  ///< the results are complete (null on CPU)
    int ranks_left = 0;
  };
  GradientPlan plan_;
  std::mutex mutex_;
  std::vector<std::vector<at::Tensor>> params_;
  std::vector<int64_t> rounds_;                              ///< updates done, per rank
  std::vector<device::Ready> produced_;                     ///< per rank, for its next round
  std::map<int64_t, Round> sums_;                            ///< by round
};

}  // namespace pipelab
