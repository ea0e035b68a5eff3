#pragma once
/// GPU tests (names start with Gpu, ctest label `gpu`): they skip with a message where
/// LibTorch sees no CUDA device, so the suite stays green on CPU-only machines.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/device/compat.h"
#include "core/device/device.h"

namespace pipelab::testing {

/// The executor-equivalence MLP (tests/exec/executor_equivalence_test.cpp) on cuda:0: dropout
/// (CUDA generators, one per block) and batch norm, 5 blocks so that 4 stages are possible.
inline constexpr const char* kGpuMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4], dropout: 0.1, batch_norm: true}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3, threads: 1, devices: [cuda:0]}
)";

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
