/// Streams, events and cross-device transfers for concurrent stages (streams.h). The CUDA
/// branch follows the caching allocator's rule for tensors shared between streams: a tensor
/// used on a stream other than the one it was allocated on is recorded on that stream
/// (c10::cuda::CUDACachingAllocator::recordStream via Tensor::record_stream).
#include <ATen/ATen.h>

#include "core/device/streams.h"

#include <map>
#include <mutex>

#ifdef PIPELAB_WITH_CUDA
#include "core/device/cuda_event.h"
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pipelab::device {

#ifdef PIPELAB_WITH_CUDA

Ready record_ready(const c10::Device& device) {
  if (!device.is_cuda()) return nullptr;
  auto ready = std::make_shared<ReadyEvent>(ReadyEvent{CudaEvent(), device});
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
    CudaEvent copied;
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

struct MarkEvent {
  CudaEvent event{cudaEventDefault};  // timing on (ATen's default turns it off)
  c10::DeviceIndex device = 0;
};

Mark mark(const c10::Device& device) {
  if (!device.is_cuda()) return nullptr;
  auto m = std::make_shared<MarkEvent>();
  m->device = device.index();
  m->event.record(c10::cuda::getCurrentCUDAStream(device.index()));
  return m;
}

c10::DeviceIndex mark_device(const Mark& m) { return m ? m->device : -1; }

double seconds_between(const Mark& from, const Mark& to) {
  if (!from || !to) return 0;
  from->event.synchronize();
  to->event.synchronize();
  return static_cast<double>(from->event.elapsed_time(to->event)) / 1e3;
}

namespace {

c10::cuda::CUDAStream stage_stream(const c10::Device& device, int stage) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(static_cast<int>(device.index()), stage);
  auto it = streams.find(key);
  if (it == streams.end()) it = streams.emplace(key, c10::cuda::getStreamFromPool(false, device.index())).first;
  return it->second;
}

}  // namespace

struct StreamScope::Impl {
  Impl(const c10::Device& device, int stage) : guard(stage_stream(device, stage)) {}
  c10::cuda::CUDAStreamGuard guard;
};

StreamScope::StreamScope(const c10::Device& device, int stage) {
  if (device.is_cuda()) impl_ = std::make_unique<Impl>(device, stage);
}

#else

struct ReadyEvent {};

Ready record_ready(const c10::Device&) { return nullptr; }

at::Tensor transfer(const at::Tensor& t, const Ready&, const c10::Device& to) {
  return !t.defined() || t.device() == to ? t : t.to(to);
}

struct MarkEvent {};

Mark mark(const c10::Device&) { return nullptr; }

c10::DeviceIndex mark_device(const Mark&) { return -1; }

double seconds_between(const Mark&, const Mark&) { return 0; }

struct StreamScope::Impl {};

StreamScope::StreamScope(const c10::Device&, int) {}

#endif

StreamScope::~StreamScope() = default;

}  // namespace pipelab::device
