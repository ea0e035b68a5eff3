/// Copies to host memory and back (host_copy.h). The CUDA branch follows the caching
/// allocator's rules for memory used on a stream other than its own: the device buffer is
/// recorded on the side stream (Tensor::record_stream) so that it is not handed out before
/// the copy has read or written it, and a pinned host block is kept by the host allocator
/// until the copies queued on it have run (ATen records an event on it for every
/// non-blocking copy).
#include "core/device/host_copy.h"

#include <ATen/ATen.h>

#include <map>

#ifdef PIPELAB_WITH_CUDA
#include "core/device/cuda_event.h"
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pipelab::device {

#ifdef PIPELAB_WITH_CUDA

namespace {

/// The side stream a device's host copies run on (one per device: copies out and in are
/// ordered among themselves, as they are on the host link).
c10::cuda::CUDAStream copy_stream(const c10::Device& device) {
  // LibTorch's pool hands streams out round-robin; one fetched per call would spread the
  // copies over many streams.
  // Per thread, so that the threads of several devices look theirs up without a lock.
  static thread_local std::map<int, c10::cuda::CUDAStream> streams;
  const int index = device.index();
  auto it = streams.find(index);
  if (it == streams.end()) it = streams.emplace(index, c10::cuda::getStreamFromPool(false, device.index())).first;
  return it->second;
}

Ready record_on(const c10::cuda::CUDAStream& stream, const c10::Device& device) {
  auto ready = std::make_shared<ReadyEvent>(ReadyEvent{CudaEvent(), device});
  ready->event.record(stream);
  return ready;
}

}  // namespace

HostCopy copy_to_host(const at::Tensor& bytes) {
  if (!bytes.is_cuda()) return {bytes.clone(), nullptr};
  const c10::Device device = bytes.device();
  c10::cuda::CUDAStream side = copy_stream(device);
  record_ready(device)->event.block(side);
  HostCopy out{at::empty(bytes.sizes(), bytes.options().device(c10::kCPU).pinned_memory(true)), nullptr};
  {
    c10::cuda::CUDAStreamGuard guard(side);
    out.bytes.copy_(bytes, /*non_blocking=*/true);
  }
  bytes.record_stream(side);
  out.done = record_on(side, device);
  return out;
}

HostCopy copy_to_device(const at::Tensor& host, const Ready& after, const c10::Device& to) {
  if (!to.is_cuda()) return {host.clone(), nullptr};
  c10::cuda::CUDAStream side = copy_stream(to);
  // Allocated for the current stream, written on the side one: the side stream waits for
  // what the current stream queued before (the block's former user) and for the copy out.
  HostCopy in{at::empty(host.sizes(), host.options().device(to).pinned_memory(false)), nullptr};
  record_ready(to)->event.block(side);
  if (after) after->event.block(side);
  {
    c10::cuda::CUDAStreamGuard guard(side);
    in.bytes.copy_(host, /*non_blocking=*/true);
  }
  in.bytes.record_stream(side);
  in.done = record_on(side, to);
  return in;
}

void wait_ready(const Ready& ready, const c10::Device& device) {
  if (ready && device.is_cuda()) ready->event.block(c10::cuda::getCurrentCUDAStream(device.index()));
}

#else

HostCopy copy_to_host(const at::Tensor& bytes) { return {bytes.clone(), nullptr}; }

HostCopy copy_to_device(const at::Tensor& host, const Ready&, const c10::Device&) { return {host.clone(), nullptr}; }

void wait_ready(const Ready&, const c10::Device&) {}

#endif

}  // namespace pipelab::device
