// MemoryMeter: bytes per tag from LibTorch's CPU (and CUDA) allocator reports. A tensor made under
// a tag is counted with its exact nbytes and given back when freed (the peak stays); threads
// without the meter are not counted; and the F actions of an MLP stage retain the same
// bytes for every micro-batch of one size.
#include <gtest/gtest.h>

#include <thread>

#include "core/util/memory_meter.h"
#include "tests/support/linear_pipeline.h"

namespace pipelab::memory_meter_test {
namespace {

TEST(MemoryMeter, CountsATensorUnderItsTagUntilItIsFreed) {
  auto meter = std::make_shared<MemoryMeter>();
  MemoryMeter::Install installed(meter);
  {
    MemoryMeter::Scope scope(meter.get(), 3);
    at::Tensor t = at::empty({1000}, at::kFloat);
    EXPECT_EQ(t.nbytes(), 4000u);
    EXPECT_EQ(meter->usage(3).current, 4000);
    EXPECT_EQ(scope.retained(), 4000);
    {
      MemoryMeter::Scope inner(meter.get(), 5);
      at::Tensor u = at::empty({10, 10}, at::kDouble);
      EXPECT_EQ(meter->usage(5).current, 800);
      EXPECT_EQ(meter->usage(3).current, 4000) << "an inner scope charges its own tag";
    }
    EXPECT_EQ(meter->usage(5).current, 0);
    EXPECT_EQ(meter->usage(5).peak, 800);
    EXPECT_EQ(scope.retained(), 4000) << "the inner scope's tensor was freed";
  }
  EXPECT_EQ(meter->usage(3).current, 0);
  EXPECT_EQ(meter->usage(3).peak, 4000);
  // Outside any scope: the untagged account.
  at::Tensor untagged = at::empty({7}, at::kByte);
  EXPECT_EQ(meter->usage(MemoryMeter::kNoTag).current, 7);
}

// A GPU's caching allocator reports to the same hook; some LibTorch versions name a block by
// a host address (their record of it), so a GPU block and a host block at one address are
// two blocks. Other devices are not counted.
TEST(MemoryMeter, CountsGpuBlocksApartFromHostBlocksAtTheSameAddress) {
  MemoryMeter meter;
  alignas(16) static char address[16];
  const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 0);
  {
    MemoryMeter::Scope scope(&meter, 2);
    meter.reportMemoryUsage(address, 1000, 0, 0, cpu);
    meter.reportMemoryUsage(address, 512, 0, 0, gpu);
    meter.reportMemoryUsage(address, 64, 0, 0, c10::Device(c10::kMeta));
    EXPECT_EQ(meter.usage(2).current, 1512);
    meter.reportMemoryUsage(address, -512, 0, 0, gpu);
    EXPECT_EQ(meter.usage(2).current, 1000) << "the GPU block's free leaves the host block";
    meter.reportMemoryUsage(address, -1000, 0, 0, cpu);
  }
  EXPECT_EQ(meter.usage(2).current, 0);
  EXPECT_EQ(meter.usage(2).peak, 1512);
}

TEST(MemoryMeter, AGroupPeaksAtItsTagsSumAtOneTimeNotAtTheSumOfTheirPeaks) {
  // Two stages on one device: stage 0 holds 1000 bytes, frees 800 of them, then stage 1
  // allocates 2000: each tag peaks on its own (1000, 2000), the device at 200 + 2000.
  auto meter = std::make_shared<MemoryMeter>();
  MemoryMeter::Install installed(meter);
  meter->group(0, 7);
  meter->group(1, 7);
  at::Tensor kept, freed, later;
  {
    MemoryMeter::Scope stage0(meter.get(), 0);
    kept = at::empty({50}, at::kFloat);
    freed = at::empty({200}, at::kFloat);
  }
  freed.reset();
  {
    MemoryMeter::Scope stage1(meter.get(), 1);
    later = at::empty({500}, at::kFloat);
  }
  EXPECT_EQ(meter->usage(0).peak, 1000);
  EXPECT_EQ(meter->usage(1).peak, 2000);
  EXPECT_EQ(meter->group_usage(7).peak, 2200);
  EXPECT_EQ(meter->group_usage(7).current, 2200);
  EXPECT_EQ(meter->group_usage(8).peak, 0);  // a group nobody is in
}

TEST(MemoryMeter, PeakRiseIsTheHighestLevelAboveTheScopesStart) {
  // An action's transient need: 4000 bytes alive before; inside, 2000 then 1000 more (3000
  // above the start), 2000 freed, then 400: the rise is 3000 and 1400 stays.
  auto meter = std::make_shared<MemoryMeter>();
  MemoryMeter::Install installed(meter);
  MemoryMeter::Scope before(meter.get(), 2);
  at::Tensor old = at::empty({1000}, at::kFloat);
  at::Tensor kept;
  {
    MemoryMeter::Scope action(meter.get(), 2);
    at::Tensor a = at::empty({500}, at::kFloat);
    kept = at::empty({250}, at::kFloat);
    a.reset();
    at::Tensor b = at::empty({100}, at::kFloat);
    EXPECT_EQ(action.peak_rise(), 3000);
    EXPECT_EQ(action.retained(), 1400);
    // A later scope starts its window at the level it finds.
    b.reset();
  }
  MemoryMeter::Scope next(meter.get(), 2);
  EXPECT_EQ(next.peak_rise(), 0);
  at::Tensor c = at::empty({10}, at::kFloat);
  EXPECT_EQ(next.peak_rise(), 40);
  EXPECT_EQ(meter->usage(2).peak, 4000 + 3000);
}

TEST(MemoryMeter, SeesOnlyThreadsItIsInstalledOn) {
  auto meter = std::make_shared<MemoryMeter>();
  std::thread([&] {
    MemoryMeter::Scope scope(meter.get(), 0);
    at::Tensor t = at::empty({256}, at::kFloat);
    EXPECT_EQ(scope.retained(), 0);
  }).join();
  EXPECT_EQ(meter->usage(0).peak, 0);
  // A block made by a metered thread and freed by one without the meter is not reported;
  // it stays counted (documented), and nothing goes negative.
  at::Tensor kept;
  std::thread([&] {
    MemoryMeter::Install installed(meter);
    MemoryMeter::Scope scope(meter.get(), 1);
    kept = at::empty({64}, at::kFloat);
  }).join();
  EXPECT_EQ(meter->usage(1).current, 256);
  kept.reset();
  EXPECT_EQ(meter->usage(1).current, 256);
  // A null meter does nothing.
  MemoryMeter::Install none(nullptr);
  MemoryMeter::Scope nothing(nullptr, 2);
  EXPECT_EQ(nothing.retained(), 0);
}

/// Micro-batch mb: 5 examples of width 8.
class Data : public Feed {
 public:
  at::Tensor input(int mb) override { return at::sin(at::arange(40, at::kFloat).reshape({5, 8}) * (1 + mb)); }
  at::Tensor target(int mb) override { return at::tensor({0, 1, 2, 3, mb % 8}, at::kLong); }
  void on_result(int, const MicroBatchResult&) override {}
};

TEST(MemoryMeter, AnMlpStageRetainsTheSameBytesForEveryMicroBatch) {
  for (const char* executor : {"{type: sequential}", "{type: threaded, intra_op_threads: 1}"}) {
    // Two stages of two Linear(8, 8)+ReLU each. Without checkpointing: a checkpointed F
    // keeps other things (its input and the blocks' generator states) than a plain one.
    testing::LinearPipeline p("{type: gpipe, chunks: 4, checkpoint: never}", "{type: sgd, lr: 0.1, momentum: 0.9}", 2, 8, 2);
    auto e = testing::make_executor(executor);
    e->stats().trace = true;
    e->stats().reset(2);
    Data data;
    for (int step = 0; step < 2; ++step) e->run(p.scheme->schedule(2, 4), p.slots, data, RunMode::Train);
    e->stats().read_memory_peaks();
    for (int s = 0; s < 2; ++s) {
      std::vector<int64_t> retained;
      for (const ActionRecord& a : e->stats().actions[static_cast<size_t>(s)]) {
        if (a.kind == ActionKind::Forward) retained.push_back(a.retained_bytes);
      }
      ASSERT_EQ(retained.size(), 8u) << executor;
      // At least the activation stage 0 sends (5 x 8 floats) stays alive.
      EXPECT_GE(retained[0], s == 0 ? 5 * 8 * 4 : 1) << executor << " stage " << s;
      for (int64_t r : retained) EXPECT_EQ(r, retained[0]) << executor << " stage " << s;
      // GPipe keeps all four micro-batches until their backwards.
      EXPECT_GE(e->stats().peak_activation_bytes[static_cast<size_t>(s)], 4 * retained[0]) << executor;
    }
  }
}

}  // namespace
}  // namespace pipelab::memory_meter_test
