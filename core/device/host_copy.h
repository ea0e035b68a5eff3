#pragma once
/// Copies of a device buffer to host memory and back, for offloaded activations
/// (core/stage/saved_tensors.h). On a CUDA device each copy runs on a side stream, after
/// the work queued so far on the current stream, to or from pinned host memory, so that it
/// overlaps the compute queued after it (PipeOffload, Wan et al. 2025, section 3: the copies hide
/// behind compute when the host link is fast enough); `done` marks its end. On the CPU it is
/// a plain copy made now, and `done` is null.
#include <ATen/core/Tensor.h>

#include "core/device/streams.h"

namespace pipelab::device {

struct HostCopy {
  at::Tensor bytes;  ///< the copy: one-dimensional, of bytes
  Ready done;        ///< the copy's end (null on the CPU)
};

/// `bytes` (a one-dimensional byte tensor) copied to host memory.
HostCopy copy_to_host(const at::Tensor& bytes);
/// `host` (from copy_to_host) copied to `to`, after `after` (the copy out) has ended.
HostCopy copy_to_device(const at::Tensor& host, const Ready& after, const c10::Device& to);
/// Work queued from now on the current stream of `device` waits for `ready` (no-op on the
/// CPU or when null).
void wait_ready(const Ready& ready, const c10::Device& device);

}  // namespace pipelab::device
