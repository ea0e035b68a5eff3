/// Version-specific LibTorch calls (compat.h). The per-device autocast API
/// (`set_autocast_enabled(DeviceType, bool)`) exists from LibTorch 2.4 on; both versions in
/// use here have it.
#include "core/device/compat.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>

namespace pipelab::device {

AutocastScope::AutocastScope(c10::DeviceType device_type, at::ScalarType dtype, bool enabled)
    : device_type_(device_type), enabled_(enabled) {
  if (!enabled_) return;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  // As torch.autocast.__exit__: the outermost region drops the cached weight casts.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

AutocastPause::AutocastPause(c10::DeviceType device_type)
    : device_type_(device_type), previous_enabled_(at::autocast::is_autocast_enabled(device_type)) {
  at::autocast::set_autocast_enabled(device_type_, false);
}

AutocastPause::~AutocastPause() { at::autocast::set_autocast_enabled(device_type_, previous_enabled_); }

bool autocast_enabled(c10::DeviceType device_type) { return at::autocast::is_autocast_enabled(device_type); }

void set_deterministic(bool on) { at::globalContext().setDeterministicAlgorithms(on, /*warn_only=*/false); }

void set_allow_tf32(bool cudnn, bool matmul) {
  at::globalContext().setAllowTF32CuDNN(cudnn);
  at::globalContext().setAllowTF32CuBLAS(matmul);
}

}  // namespace pipelab::device
