#pragma once
/// Collectives across data-parallel replicas, behind one interface: in one process (the
/// sequential and threaded executors) or over a c10d process group (the distributed
/// executor), so a scheme never knows which one it runs on.
#include <ATen/Tensor.h>

#include <map>
#include <mutex>
#include <vector>

#include "core/device/streams.h"

namespace pipelab {

class AllReduce {
 public:
  virtual ~AllReduce() = default;
  /// Registers replica `rank`'s parameters (whose .grad() an in-process sum reads); a
  /// process group needs nothing (each rank brings its own gradients).
  virtual void add_rank(int /*rank*/, std::vector<at::Tensor> /*params*/) {}
  /// Replica `rank`'s gradients of this round are all queued (called after its backward, on
  /// its own thread and stream): an in-process sum on another stream waits for them.
  virtual void produced(int /*rank*/) {}
  /// Replaces the gradients of `params` (replica `rank`'s) by their sum over all replicas.
  /// Every replica calls it once per update, after all replicas' backwards (the schedule's
  /// synchronized updates guarantee that).
  virtual void sum_gradients(int rank, const std::vector<at::Tensor>& params) = 0;
};

/// The replicas live in this process: the first caller of a round adds up every replica's
/// gradients (in rank order, so the result does not depend on thread timing); every caller
/// then takes the sum. On CUDA each replica computes on a stream of its own (threaded
/// executor), so the sum first waits for every replica's `produced` event, and each caller
/// waits for the sum's event before copying it.
class LocalAllReduce : public AllReduce {
 public:
  explicit LocalAllReduce(int ranks)
      : params_(static_cast<size_t>(ranks)), rounds_(static_cast<size_t>(ranks), 0), produced_(static_cast<size_t>(ranks)) {}
  /// Registers replica `rank`'s parameters (whose .grad() the sums read).
  void add_rank(int rank, std::vector<at::Tensor> params) override;
  void produced(int rank) override;
  void sum_gradients(int rank, const std::vector<at::Tensor>& params) override;

 private:
  struct Round {
    std::vector<at::Tensor> sums;
    device::Ready ready;  ///< the sums are complete (null on CPU)
    int ranks_left = 0;
  };
  std::mutex mutex_;
  std::vector<std::vector<at::Tensor>> params_;
  std::vector<int64_t> rounds_;                              ///< updates done, per rank
  std::vector<device::Ready> produced_;                     ///< per rank, for its next round
  std::map<int64_t, Round> sums_;                            ///< by round
};

}  // namespace pipelab
