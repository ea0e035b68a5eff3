#pragma once
/// The one place for LibTorch calls whose spelling changes between versions (this machine
/// builds against 2.15, the GPU machine's wheel is 2.11): autocast regions and the
/// determinism switches; CUDA's event type is in core/device/cuda_event.h, so that CPU
/// sources never see CUDA headers. Everything else uses LibTorch's stable API directly.
#include <ATen/core/ScalarType.h>
#include <c10/core/DeviceType.h>

namespace pipelab::device {

/// While alive, ops on `device_type` run under LibTorch's autocast with `dtype` (bf16 or
/// fp16), as Python's `torch.autocast(device_type, dtype)` would; nested scopes are fine.
/// The cast cache is per thread and cleared when the outermost scope ends, so a weight
/// swapped in by a weight policy between regions is never served from a stale cast.
/// A scope made with `enabled = false` does nothing.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device_type, at::ScalarType dtype, bool enabled = true);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool enabled_, previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

/// While alive, autocast is off on `device_type` (Python's `torch.autocast(device_type,
/// enabled=False)` inside an autocast region): what runs there computes in its inputs' dtype.
class AutocastPause {
 public:
  explicit AutocastPause(c10::DeviceType device_type);
  ~AutocastPause();
  AutocastPause(const AutocastPause&) = delete;
  AutocastPause& operator=(const AutocastPause&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
};

/// Whether autocast is on for `device_type` on this thread.
bool autocast_enabled(c10::DeviceType device_type);

/// torch.use_deterministic_algorithms(on): kernels with a deterministic variant use it,
/// the others throw. (CUDA's cuBLAS also needs CUBLAS_WORKSPACE_CONFIG=:4096:8 in the
/// environment before the first cuBLAS call.)
void set_deterministic(bool on);
/// torch.backends.cudnn.allow_tf32 / torch.backends.cuda.matmul.allow_tf32.
void set_allow_tf32(bool cudnn, bool matmul);

}  // namespace pipelab::device
