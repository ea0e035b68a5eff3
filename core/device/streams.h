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

/// A point in the work queued on a stream (a CUDA event that records time), to measure
/// when queued work ran on the device rather than when the host queued it. Null on CPU.
struct MarkEvent;
using Mark = std::shared_ptr<MarkEvent>;

/// Marks the work queued so far on this thread's current stream of `device`.
Mark mark(const c10::Device& device);
/// The CUDA device index a mark was made on.
c10::DeviceIndex mark_device(const Mark& m);
/// Device seconds from `from` to `to` (marks on one device; waits until `to` has passed).
double seconds_between(const Mark& from, const Mark& to);

/// While alive, work this thread queues on `device` goes to the stream of stage `stage`:
/// one stream from LibTorch's pool per (device, stage), the same one for every schedule
/// run, so that memory a stage keeps from one run to the next (stashed weights, in-flight
/// activations of an epoch-long pipeline) stays on the stream that allocated it. Stages
/// on one device thus overlap. No-op on CPU.
class StreamScope {
 public:
  StreamScope(const c10::Device& device, int stage);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipelab::device
