// Several processes on GPUs (run.executor.backend, exec/device_channels.h). NCCL refuses two
// ranks on one GPU, so on a machine with one GPU `nccl` must say so and `auto` must fall back
// to Gloo (through host memory) with the same numbers as one process; GPU to GPU over NCCL
// needs a GPU per rank and runs only where there are two.
#include <fmt/format.h>

#include "core/device/device.h"
#include "core/processes/device_channel.h"
#include "core/processes/process_group.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::gpu_processes_test {
namespace {

const char* kTwoStages = R"(
model:     {type: mlp, sizes: [12, 32, 32, 32, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 128, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 1, threads: 1, progress: false, dtype: float64}
)";

std::pair<int, std::string> pipelab_gpu(const std::string& args) {
  return testing::shell("OMP_NUM_THREADS=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 " + std::string(PIPELAB_BINARY) + " " + args);
}

/// One process, then two launched with `backend` on `devices`: the same run.
std::string expect_two_processes_equal_one(const std::string& devices, const std::string& backend) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kTwoStages);
  const std::string sets = fmt::format("--set 'run.devices={}'", devices);
  const auto [c1, out1] = pipelab_gpu(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets,
                                                  dir.file("one")));
  EXPECT_EQ(c1, 0) << out1;
  const auto [c2, out2] = pipelab_gpu(fmt::format(
      "launch --nproc 2 {} {} --set run.output={} --set 'run.executor={{type: distributed, backend: {}}}'",
      dir.file("e.yaml"), sets, dir.file("two"), backend));
  EXPECT_EQ(c2, 0) << out2;
  if (c1 == 0 && c2 == 0) testing::expect_same_run(dir.file("one"), dir.file("two"));
  return out2;
}

TEST(GpuProcesses, NcclWithTwoRanksOnOneGpuSaysWhy) {
  PIPELAB_REQUIRE_GPU();
  if (!dist::available() || !dist::nccl_available()) GTEST_SKIP() << "built without Gloo or NCCL";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kTwoStages);
  const auto [code, out] = pipelab_gpu(fmt::format(
      "launch --nproc 2 {} --set 'run.devices=[cuda:0, cuda:0]' --set run.output={} "
      "--set 'run.executor={{type: distributed, backend: nccl}}'",
      dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("ranks 0 and 1 share the GPU"), std::string::npos) << out;
}

TEST(GpuProcesses, AutoWithTwoRanksOnOneGpuUsesGlooAndEqualsOneProcess) {
  PIPELAB_REQUIRE_GPU();
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const std::string out = expect_two_processes_equal_one("[cuda:0, cuda:0]", "auto");
  EXPECT_NE(out.find("backend auto uses gloo"), std::string::npos) << out;
}

TEST(GpuProcesses, NcclOnTwoGpusEqualsOneProcess) {
  PIPELAB_REQUIRE_GPU();
  if (device::cuda_device_count() < 2) GTEST_SKIP() << "NCCL between processes needs two GPUs; this machine has one";
  if (!dist::available() || !dist::nccl_available()) GTEST_SKIP() << "built without Gloo or NCCL";
  const std::string out = expect_two_processes_equal_one("[cuda:0, cuda:1]", "nccl");
  EXPECT_EQ(out.find("uses gloo"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipelab::gpu_processes_test
