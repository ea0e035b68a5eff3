#pragma once
/// How CUDA tensors cross between the distributed executor's processes
/// (run.executor.backend): through host memory over Gloo, or GPU to GPU over NCCL, one
/// device channel per edge of the schedule between two ranks (dist/device_channel.h).
#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/processes/device_channel.h"
#include "core/exec/process_world.h"
#include "core/schedule/schedule.h"

namespace pipelab {

class DeviceChannels {
 public:
  /// At the first call, every rank decides alike from every rank's stage devices: `gloo`
  /// uses none; `nccl` needs every stage on its own rank's GPU (NCCL refuses two ranks on
  /// one GPU) and each edge's sends and receives in the same order (NCCL has no tags), and
  /// says which is missing otherwise (a UserError); `auto` is nccl where it can be, else
  /// gloo. With NCCL, every edge of `s` between two ranks gets its channel.
  void connect(const std::string& backend, ProcessWorld& world, const std::vector<c10::Device>& devices,
               const Schedule& s);
  /// The channel of the edge from stage `from` to stage `to`, or null.
  dist::DeviceChannel* find(int from, int to) const;
  /// "gloo" or "nccl" once connect() ran.
  const std::string& chosen() const { return chosen_; }

 private:
  std::string chosen_;
  std::string backend_;
  std::map<std::pair<int, int>, std::unique_ptr<dist::DeviceChannel>> channels_;
};

/// Why the edges of `s` between different ranks (`rank_of`: stage -> rank) cannot go over
/// channels without tags ("" if they can): the first edge whose receiver takes its messages
/// in another order than its sender sends them.
std::string untagged_order_problem(const Schedule& s, const std::function<int(int)>& rank_of);

}  // namespace pipelab
