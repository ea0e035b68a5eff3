#pragma once
/// GPU tests (names start with Gpu, ctest label `gpu`): they skip with a message where
/// LibTorch sees no CUDA device, so the suite stays green on CPU-only machines.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/device/compat.h"
#include "core/device/device.h"

namespace pipelab::testing {

/// Skips the calling test without a CUDA device.
#define PIPELAB_REQUIRE_GPU()                                                              \
  do {                                                                                     \
    if (!::pipelab::device::cuda_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (false)

/// Bitwise-reproducible CUDA: deterministic kernels, and cuBLAS's fixed workspace (read when
/// cuBLAS starts, so this must run before the process's first matrix product; ctest runs
/// every test in a process of its own).
inline void deterministic_cuda() {
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  device::set_deterministic(true);
}

}  // namespace pipelab::testing
