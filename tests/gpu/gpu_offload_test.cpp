// OFFLOAD and RELOAD on cuda:0 (core/device/host_copy.h): the copies run on a side stream
// to pinned host memory and back, ordered by events, and the backward waits for its reload:
// a 4-stage 1F1B trains to the same bits with and without offload, threaded (four stage
// streams) and sequential, and the CUDA caching allocator's peak drops.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::gpu_offload_test {
namespace {

const std::vector<std::string> kPipeline{"scheme={type: pipedream_flush, chunks: 8}", "partition.stages=4"};
const char* const kOffload = "partition.offload={stages: except_last, fraction: 1, prefetch: 1}";

TEST(GpuOffload, TrainsToTheSameBitsAsWithoutInEitherExecutor) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  for (const char* executor : {"sequential", "{type: threaded, intra_op_threads: 1}"}) {
    std::vector<std::string> kept = kPipeline;
    kept.push_back(std::string("run.executor=") + executor);
    std::vector<std::string> moved = kept;
    moved.push_back(kOffload);
    const TensorDict a = testing::train(testing::kGpuMlp, kept), b = testing::train(testing::kGpuMlp, moved);
    EXPECT_TRUE(testing::identical(a, b)) << executor << ": max difference " << testing::max_difference(a, b);
  }
}

/// The CUDA caching allocator's peak of allocated bytes on cuda:0 over a traced run.
double cuda_peak(const std::string& extra) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kGpuMlp);
  std::string sets;
  for (const std::string& s : kPipeline) sets += " --set '" + s + "'";
  const auto [rc, log] = testing::pipelab(fmt::format(
      "run --quiet {} --set run.output={} --set run.executor=sequential --set model.sizes=[12,2048,2048,2048,2048,4] {} {}",
      dir.file("e.yaml"), dir.file("run"), sets, extra));
  EXPECT_EQ(rc, 0) << log;
  const auto costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  double peak = 0;
  for (const auto& s : costs["stages"]) peak = std::max(peak, s.value("cuda_allocated_peak_bytes", 0.0));
  std::printf("[ figure ] offload %s: CUDA allocated peak %.2f MiB\n", extra.empty() ? "off" : "on", peak / (1 << 20));
  return peak;
}

TEST(GpuOffload, TheCachingAllocatorsPeakDrops) {
  PIPELAB_REQUIRE_GPU();
  const double kept = cuda_peak("");
  const double moved = cuda_peak(fmt::format("--set '{}'", kOffload));
  EXPECT_GT(kept, 0);
  EXPECT_LT(moved, kept);
}

}  // namespace
}  // namespace pipelab::gpu_offload_test
