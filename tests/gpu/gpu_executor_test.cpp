// The simulated-on-one-GPU mode: every stage on cuda:0. Sequential == threaded (one CUDA
// stream per stage thread) bit for bit for every registered scheme at 2 and 4 stages, under
// deterministic kernels; and the threaded executor really runs stages concurrently.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "core/device/streams.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"
#include "tests/support/linear_pipeline.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::gpu_executor_test {
namespace {

const char* const kMlp = testing::kGpuMlp;

class GpuExecutorEquivalence : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(GpuExecutorEquivalence, ThreadedEqualsSequentialBitwiseOnOneGpu) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  const testing::SchemeCase& c = GetParam();
  const std::vector<std::string> common{"scheme=" + c.scheme, fmt::format("partition.stages={}", c.stages)};
  auto with = [&](const std::string& executor) {
    std::vector<std::string> o = common;
    o.push_back("run.executor=" + executor);
    return testing::train(kMlp, o);
  };
  const TensorDict sequential = with("sequential");
  const TensorDict threaded = with("{type: threaded, intra_op_threads: 1}");
  EXPECT_TRUE(testing::identical(sequential, threaded)) << "max difference " << testing::max_difference(sequential, threaded);
  // ... and the run trained something: the weights moved from their initial values.
  EXPECT_GT(testing::max_difference(sequential, testing::train(kMlp, {"scheme=" + c.scheme,
                                                                       fmt::format("partition.stages={}", c.stages),
                                                                       "run.epochs=1"})),
            0);
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuExecutorEquivalence, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

/// Feeds the same micro-batch every time (the data do not matter for timing).
class SameBatch : public Feed {
 public:
  SameBatch(int64_t rows, int64_t width, const c10::Device& device)
      : x_(at::randn({rows, width}, at::TensorOptions().device(device))),
        y_(at::zeros({rows}, at::TensorOptions().dtype(at::kLong).device(device))) {}
  at::Tensor input(int) override { return x_; }
  at::Tensor target(int) override { return y_; }
  void on_result(int, const MicroBatchResult&) override {}

 private:
  at::Tensor x_, y_;
};

/// Total length of the union of [start, end) intervals.
double union_length(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, start = -1, end = -1;
  for (const auto& [s, e] : v) {
    if (s > end) {
      total += end - start;
      start = s;
      end = e;
    } else {
      end = std::max(end, e);
    }
  }
  return total + (end - start);
}

TEST(GpuThreadedExecutor, StagesOverlapOnOneGpu) {
  PIPELAB_REQUIRE_GPU();
  // 4-stage GPipe, 8 micro-batches of 32 rows through 4 x Linear(256)+ReLU per stage: kernels
  // of a few microseconds, far from filling the GPU, so four streams can run side by side.
  const c10::Device gpu(c10::kCUDA, 0);
  const int stages = 4, chunks = 8;
  testing::LinearPipeline seq_p(fmt::format("{{type: gpipe, chunks: {}}}", chunks), "{type: sgd, lr: 0.01}", stages,
                                256, 4, gpu);
  testing::LinearPipeline thr_p(fmt::format("{{type: gpipe, chunks: {}}}", chunks), "{type: sgd, lr: 0.01}", stages,
                                256, 4, gpu);
  SameBatch feed(32, 256, gpu);
  auto sequential = testing::make_executor("{type: sequential}");
  auto threaded = testing::make_executor("{type: threaded, intra_op_threads: 1}");
  const Schedule s = seq_p.scheme->schedule(stages, chunks);
  const auto time_steps = [&](Executor& ex, testing::LinearPipeline& p, int steps) {
    device::synchronize(gpu);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) ex.run(s, p.slots, feed, RunMode::Train);
    device::synchronize(gpu);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  };
  time_steps(*sequential, seq_p, 3);  // warm-up: allocator, cuBLAS handles, stream pool
  time_steps(*threaded, thr_p, 3);
  double seq = 1e9, thr = 1e9;
  for (int round = 0; round < 5; ++round) {
    seq = std::min(seq, time_steps(*sequential, seq_p, 10));
    thr = std::min(thr, time_steps(*threaded, thr_p, 10));
  }
  // One traced step: the device intervals of each stage's actions (CUDA events on the
  // stage's stream, after its receives and before its sends).
  threaded->stats().trace = true;
  threaded->stats().reset(stages);
  threaded->run(s, thr_p.slots, feed, RunMode::Train);
  threaded->stats().resolve_device_times();
  std::vector<std::pair<double, double>> all;
  double busy = 0;
  for (const auto& stage : threaded->stats().actions) {
    ASSERT_FALSE(stage.empty());
    std::vector<std::pair<double, double>> mine;
    for (const ActionRecord& a : stage) {
      ASSERT_GE(a.device_end, a.device_start);
      mine.emplace_back(a.device_start, a.device_end);
    }
    busy += union_length(mine);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  const double span = union_length(all);
  std::cout << fmt::format("[ figure ] 4-stage GPipe on one GPU: sequential {:.3f} ms/step, threaded {:.3f} ms/step "
                           "(speed-up {:.2f}x); stage-busy time / busy span = {:.2f}\n",
                           seq * 1e3, thr * 1e3, seq / thr, busy / span);
  // Stages overlap: their busy time adds up to more than the time anything was busy.
  EXPECT_GT(busy / span, 1.2);
}

}  // namespace
}  // namespace pipelab::gpu_executor_test
