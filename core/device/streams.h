#pragma once
/// Streams, events and cross-device transfers for concurrent stages (the CUDA half of
/// core/device, next to device.h). Concurrent stages on CUDA each compute on a stream of
/// their own, and a tensor one stage produced reaches another over a copy stream ordered
/// by events, never by a host synchronisation. On CPU all of this is a no-op.
#include <c10/core/Device.h>

#include <memory>

namespace at {
class Tensor;
}

namespace pipelab::device {

/// What a message waits for: an event recorded after the work that produced it (CUDA);
/// null on CPU.
struct ReadyEvent;
using Ready = std::shared_ptr<ReadyEvent>;

/// Marks the work queued so far on this thread's current stream of `device`.
Ready record_ready(const c10::Device& device);

/// `t` on device `to`, safe to use on `to`'s current stream: the copy (if any) runs on a
/// copy stream after `ready`, the current stream waits for it, and both tensors are marked
/// as used by the streams that touch them (record_stream), so the caching allocator does
/// not hand their memory out early.
at::Tensor transfer(const at::Tensor& t, const Ready& ready, const c10::Device& to);

/// While alive, work this thread queues on `device` goes to a stream of its own from
/// LibTorch's pool (one per stage thread, so stages overlap). No-op on CPU.
class StreamScope {
 public:
  explicit StreamScope(const c10::Device& device);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipelab::device
