#pragma once
/// CUDA tensors from one rank's GPU to another's, device to device over NCCL (c10d's
/// ProcessGroupNCCL), for the distributed executor's `backend: nccl`.
///
/// NCCL's point-to-point operations carry no tags: between two ranks, the k-th receive
/// takes the k-th send. A channel therefore serves one direction of one stage-to-stage edge,
/// whose sender and receiver both walk the schedule's order (ProcessWorld checks that the two
/// orders agree before it picks NCCL), and each channel is its own two-rank communicator, so
/// that a receive waiting on one edge never holds up a send on another (NCCL runs the
/// operations of one communicator in order on one stream).
#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>

namespace c10d {
class Store;
}

namespace pipelab::dist {

class DeviceChannel {
 public:
  virtual ~DeviceChannel() = default;
  /// Starts sending CUDA tensor `t`, after the work queued on the current stream; returns at
  /// once and keeps `t` alive until it has gone.
  virtual void send(const at::Tensor& t) = 0;
  /// Receives into CUDA tensor `t` (its shape and dtype as sent): the current stream waits
  /// for the data; the host does not.
  virtual void recv(at::Tensor& t) = 0;
  /// Waits for every send started so far.
  virtual void complete_sends() = 0;
};

/// Whether this pipelab can make NCCL channels (LibTorch built with c10d's NCCL, and CUDA).
bool nccl_available();

/// A two-rank NCCL communicator over `store` (a prefix of the group's store that only these
/// two ranks use), as rank `rank` (0: the sender, 1: the receiver).
std::unique_ptr<DeviceChannel> nccl_channel(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            double timeout_seconds);

/// What tells GPUs apart across processes and hosts, as NCCL does ("host/PCI bus id");
/// "cpu" for the host.
std::string device_identity(const c10::Device& device);

}  // namespace pipelab::dist
