#pragma once
/// The one small header behind which CUDA-specific code sits (streams, events, device
/// guards, generators). The same sources build with and without a GPU present: with a
/// CUDA-enabled LibTorch, PIPELAB_WITH_CUDA is defined and the .cpp uses LibTorch's CUDA
/// API; every function also works (or fails with a clear UserError) on a machine without
/// a GPU. Version-specific LibTorch calls belong here too.
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace pipelab::device {

/// True when LibTorch sees at least one CUDA device.
bool cuda_available();
/// Number of CUDA devices (0 without a GPU).
int cuda_device_count();
/// Parses "cpu", "cuda" or "cuda:N"; a GPU device on a machine without it is a UserError.
c10::Device parse(const std::string& text);
/// Waits for all work queued on `device` (no-op on CPU).
void synchronize(const c10::Device& device);
/// A new random generator for `device`, seeded with `seed`.
at::Generator make_generator(const c10::Device& device, uint64_t seed);
/// The CUDA caching allocator's peaks on a GPU since its process started: bytes held by
/// tensors, and bytes the allocator reserved from the driver (both 0 on the CPU). What
/// nvidia-smi would not show apart: the first is what a simulator's memory model predicts.
struct AllocatorPeak {
  int64_t allocated = 0;
  int64_t reserved = 0;
};
AllocatorPeak allocator_peak(const c10::Device& device);
/// "LibTorch 2.15.0 (CUDA 13.2, 1 GPU)" for logs and run records.
std::string describe_runtime();

}  // namespace pipelab::device
