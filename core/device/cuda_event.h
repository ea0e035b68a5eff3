#pragma once
/// CUDA's event wrapper, whose home moved from ATen (at::cuda::CUDAEvent, LibTorch <= 2.x)
/// to c10 (c10::cuda::CUDAEvent). A header of its own, included only by CUDA sources under
/// PIPELAB_WITH_CUDA, so that CPU sources never see CUDA headers (compat.h's concern, the
/// other version-specific spellings, stays CUDA-free).
#ifdef PIPELAB_WITH_CUDA
#if __has_include(<c10/cuda/CUDAEvent.h>)
#include <c10/cuda/CUDAEvent.h>
namespace pipelab::device {
using CudaEvent = c10::cuda::CUDAEvent;
}  // namespace pipelab::device
#else
#include <ATen/cuda/CUDAEvent.h>
namespace pipelab::device {
using CudaEvent = at::cuda::CUDAEvent;
}  // namespace pipelab::device
#endif

#include <c10/core/Device.h>
namespace pipelab::device {
/// What streams.h's Ready points at on a CUDA build: an event after the work that made a
/// tensor, and its device (streams.cpp and host_copy.cpp read it).
struct ReadyEvent {
  CudaEvent event;
  c10::Device device;
};
}  // namespace pipelab::device
#endif
