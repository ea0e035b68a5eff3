#include "core/device/device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <fmt/format.h>

#include "core/util/error.h"

#ifdef PIPELAB_WITH_CUDA
#include "core/device/cuda_generator.h"
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace pipelab::device {

bool cuda_available() { return torch::cuda::is_available(); }

int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

c10::Device parse(const std::string& text) {
  c10::Device d(c10::kCPU);
  try {
    d = c10::Device(text);
  } catch (const std::exception&) {
    throw UserError(fmt::format("'{}' is not a device. Fix: use cpu, cuda or cuda:N.", text));
  }
  if (d.is_cpu()) return d;
  if (!d.is_cuda()) {
    throw UserError(fmt::format("device '{}' is not supported. Fix: use cpu or cuda:N.", text));
  }
  const int count = cuda_device_count();
  const int index = d.has_index() ? d.index() : 0;
  if (index >= count) {
    if (count == 0) {
      throw UserError(fmt::format("device '{}' is not available: this machine has no CUDA device (or this build of "
                                  "LibTorch cannot reach one). Fix: use cpu",
                                  text));
    }
    throw UserError(fmt::format("device '{}' is not available: this machine has {} CUDA device(s). "
                                "Fix: use cpu or {}.",
                                text, count, count == 1 ? "cuda:0" : fmt::format("cuda:0..cuda:{}", count - 1)));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

at::Generator make_generator(const c10::Device& device, uint64_t seed) {
  if (device.is_cuda()) {
#ifdef PIPELAB_WITH_CUDA
    return make_cuda_generator(device.index(), seed);
#else
    throw UserError("this pipelab was built against a LibTorch without CUDA. Fix: use cpu devices.");
#endif
  }
  return at::detail::createCPUGenerator(seed);
}

AllocatorPeak allocator_peak(const c10::Device& device) {
  AllocatorPeak out;
#ifdef PIPELAB_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out.allocated = stats.allocated_bytes[all].peak;
    out.reserved = stats.reserved_bytes[all].peak;
  }
#else
  (void)device;
#endif
  return out;
}

std::string describe_runtime() {
  const int gpus = cuda_device_count();
  return fmt::format("LibTorch {} ({} GPU{}, {} intra-op threads)", TORCH_VERSION, gpus, gpus == 1 ? "" : "s",
                     at::get_num_threads());
}

}  // namespace pipelab::device
