/// Streams, events and cross-device transfers for concurrent stages (streams.h). The CUDA
/// branch follows the caching allocator's rule for tensors shared between streams: a tensor
/// used on a stream other than the one it was allocated on is recorded on that stream
/// (c10::cuda::CUDACachingAllocator::recordStream via Tensor::record_stream).
#include <ATen/ATen.h>

#include "core/device/streams.h"

#ifdef PIPELAB_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pipelab::device {

#ifdef PIPELAB_WITH_CUDA

struct ReadyEvent {
  at::cuda::CUDAEvent event;
  c10::Device device;
};

Ready record_ready(const c10::Device& device) {
  if (!device.is_cuda()) return nullptr;
  auto ready = std::make_shared<ReadyEvent>(ReadyEvent{at::cuda::CUDAEvent(), device});
  ready->event.record(c10::cuda::getCurrentCUDAStream(device.index()));
  return ready;
}

at::Tensor transfer(const at::Tensor& t, const Ready& ready, const c10::Device& to) {
  if (!t.defined()) return t;
  const bool same_device = t.device() == to;
  if (!t.is_cuda() && !to.is_cuda()) return same_device ? t : t.to(to);
  if (same_device) {
    // Produced on another stream of this device: the consumer's stream waits for it.
    c10::cuda::CUDAStream consumer = c10::cuda::getCurrentCUDAStream(to.index());
    if (ready) ready->event.block(consumer);
    t.record_stream(consumer);
    return t;
  }
  // The copy runs on a side stream of the device that owns the memory being written (the
  // destination, or the source when copying to the host).
  const c10::Device copy_device = to.is_cuda() ? to : t.device();
  c10::cuda::CUDAStream copy = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, copy_device.index());
  if (ready) ready->event.block(copy);
  at::Tensor out;
  {
    c10::cuda::CUDAStreamGuard guard(copy);
    out = t.to(to, /*non_blocking=*/true);
  }
  if (t.is_cuda()) t.record_stream(copy);
  if (to.is_cuda()) {
    c10::cuda::CUDAStream consumer = c10::cuda::getCurrentCUDAStream(to.index());
    at::cuda::CUDAEvent copied;
    copied.record(copy);
    copied.block(consumer);
    out.record_stream(consumer);
  } else {
    // A host tensor has no stream to wait on: this is the one place that synchronises
    // (messages to a CPU stage), and only with the copy stream.
    copy.synchronize();
  }
  return out;
}

struct StreamScope::Impl {
  explicit Impl(const c10::Device& device) : guard(c10::cuda::getStreamFromPool(false, device.index())) {}
  c10::cuda::CUDAStreamGuard guard;
};

StreamScope::StreamScope(const c10::Device& device) {
  if (device.is_cuda()) impl_ = std::make_unique<Impl>(device);
}

#else

struct ReadyEvent {};

Ready record_ready(const c10::Device&) { return nullptr; }

at::Tensor transfer(const at::Tensor& t, const Ready&, const c10::Device& to) {
  return !t.defined() || t.device() == to ? t : t.to(to);
}

struct StreamScope::Impl {};

StreamScope::StreamScope(const c10::Device&) {}

#endif

StreamScope::~StreamScope() = default;

}  // namespace pipelab::device
