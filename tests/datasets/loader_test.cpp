// The prefetching loader: worker threads give exactly the single-threaded loader's batches
// (order and augmentation seeds), in or out of order, across epochs; errors reach the
// training thread; waiting is measured.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/data/loader.h"
#include "datasets/image_dataset.h"
#include "tests/datasets/dataset_test_util.h"

namespace pipelab::loader_test {
namespace {

/// x = example index + seeded noise, so a batch shows both its examples and its seed.
/// Optionally slow, and failing on one example.
class NoisyDataset : public Dataset {
 public:
  explicit NoisyDataset(int64_t n, int sleep_ms = 0, int64_t bad = -1) : n_(n), sleep_ms_(sleep_ms), bad_(bad) {}
  int64_t size() const override { return n_; }
  Batch get(const std::vector<int64_t>& indices, uint64_t seed) const override {
    if (sleep_ms_) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
    for (const int64_t i : indices) {
      if (i == bad_) throw UserError(fmt::format("example {} is damaged", i));
    }
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const at::Tensor idx = at::tensor(indices, at::kLong);
    return {idx.to(at::kFloat) + at::rand({idx.size(0)}, gen), idx};
  }

 private:
  int64_t n_;
  int sleep_ms_;
  int64_t bad_;
};

LoaderOptions options(int64_t batch, bool train, int workers, int prefetch) {
  LoaderOptions o{batch, train, train, 7};
  o.prefetch.workers = workers;
  o.prefetch.prefetch = prefetch;
  return o;
}

std::vector<Batch> epoch(DataLoader& loader, int e) {
  loader.start_epoch(e);
  std::vector<Batch> out;
  for (int64_t j = 0; j < loader.batches(); ++j) out.push_back(loader.batch(j));
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) {
    EXPECT_TRUE(at::equal(a[j].x, b[j].x)) << "batch " << j;
    EXPECT_TRUE(at::equal(a[j].y, b[j].y)) << "batch " << j;
  }
}

TEST(Loader, PrefetchingGivesTheSingleThreadedBatches) {
  auto ds = std::make_shared<NoisyDataset>(103);
  for (const bool train : {true, false}) {
    DataLoader reference(ds, options(10, train, 0, 1));
    for (const auto& [workers, prefetch] : std::vector<std::pair<int, int>>{{1, 1}, {1, 4}, {2, 2}, {3, 7}}) {
      DataLoader loader(ds, options(10, train, workers, prefetch));
      EXPECT_EQ(loader.batches(), train ? 10 : 11);
      for (const int e : {0, 1, 1, 2}) expect_same(epoch(loader, e), epoch(reference, e));
    }
  }
}

TEST(Loader, AugmentedImagesAreBitIdentical) {
  ImageTransformOptions t;
  t.crop_padding = 4;
  t.flip = true;
  t.mean = {0.4914, 0.4822, 0.4465};
  t.std = {0.2023, 0.1994, 0.2010};
  const auto owner = Registry<DatasetFactory>::get().create_default("synthetic");
  auto transform = std::make_shared<const ImageTransform>(t, std::vector<int64_t>{3, 32, 32}, *owner);
  auto ds = std::make_shared<ImageTensorDataset>(at::randint(256, {40, 3, 32, 32}, at::kLong).to(at::kByte),
                                                 at::arange(40, at::kLong), transform, true);
  DataLoader reference(ds, options(8, true, 0, 1)), loader(ds, options(8, true, 2, 3));
  expect_same(epoch(loader, 3), epoch(reference, 3));
}

TEST(Loader, OutOfOrderAndRestartedEpochs) {
  auto ds = std::make_shared<NoisyDataset>(50);
  DataLoader reference(ds, options(5, true, 0, 1)), loader(ds, options(5, true, 2, 3));
  const std::vector<Batch> want = epoch(reference, 4);
  loader.start_epoch(4);
  for (const int64_t j : {6, 0, 1, 9, 2, 2}) {
    const Batch b = loader.batch(j);
    EXPECT_TRUE(at::equal(b.x, want[static_cast<size_t>(j)].x)) << j;
  }
  // Abandoning an epoch half-way drops its queued batches.
  loader.start_epoch(0);
  loader.batch(0);
  loader.batch(1);
  expect_same(epoch(loader, 1), epoch(reference, 1));
}

/// NoisyDataset that counts its builds, and lets a test wait for a count.
class CountingDataset : public NoisyDataset {
 public:
  using NoisyDataset::NoisyDataset;
  Batch get(const std::vector<int64_t>& indices, uint64_t seed) const override {
    Batch b = NoisyDataset::get(indices, seed);
    std::lock_guard<std::mutex> lock(mutex_);
    ++builds_;
    built_.notify_all();
    return b;
  }
  int builds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return builds_;
  }
  void wait_for(int n) const {
    std::unique_lock<std::mutex> lock(mutex_);
    built_.wait(lock, [&] { return builds_ >= n; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable built_;
  mutable int builds_ = 0;
};

TEST(Loader, TheNextEpochsFirstBatchesAreBuiltAhead) {
  // 5 batches an epoch, 3 prefetched: once epoch 0's last batch is taken the workers go on
  // into epoch 1 (its first three batches), which starting it keeps; the batches are still
  // exactly the single-threaded loader's.
  auto ds = std::make_shared<CountingDataset>(50);
  DataLoader reference(std::make_shared<NoisyDataset>(50), options(10, true, 0, 1)), loader(ds, options(10, true, 2, 3));
  std::vector<Batch> first;
  for (int64_t j = 0; j < 5; ++j) first.push_back(loader.batch(j));
  expect_same(first, epoch(reference, 0));
  ds->wait_for(8);  // epoch 0's five and epoch 1's first three
  loader.start_epoch(1);
  const std::vector<Batch> want = epoch(reference, 1);
  for (int64_t j = 0; j < 3; ++j) {
    const Batch b = loader.batch(j);
    EXPECT_TRUE(at::equal(b.x, want[static_cast<size_t>(j)].x)) << j;
  }
  // Taking epoch 1's first three built only what the window moved on to, never those again.
  EXPECT_LE(ds->builds(), 11);
  // Starting another epoch than the next one drops what was built ahead.
  loader.batch(3);
  loader.batch(4);
  expect_same(epoch(loader, 3), epoch(reference, 3));
  expect_same(epoch(loader, 0), epoch(reference, 0));
  expect_same(epoch(loader, 1), epoch(reference, 1));
}

TEST(Loader, WorkerErrorsReachTheCaller) {
  auto ds = std::make_shared<NoisyDataset>(20, 0, 13);
  DataLoader loader(ds, options(4, false, 2, 4));
  loader.start_epoch(0);
  for (int64_t j = 0; j < loader.batches(); ++j) {
    const std::string error = testing::user_error([&] { loader.batch(j); });
    EXPECT_EQ(error, j == 3 ? "example 13 is damaged" : "") << j;
  }
}

TEST(Loader, PrefetchingHidesDataTimeBehindTraining) {
  // Each batch takes 30 ms to build and each "training step" 60 ms: built in the
  // background, batches are ready when training asks (waits are sleeps, not CPU work,
  // so a busy machine does not change the outcome much).
  auto ds = std::make_shared<NoisyDataset>(60, 30);
  const auto waited = [&](int workers) {
    DataLoader loader(ds, options(10, true, workers, 2));
    loader.start_epoch(0);
    loader.take_wait_seconds();
    for (int64_t j = 0; j < loader.batches(); ++j) {
      loader.batch(j);
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
    return loader.take_wait_seconds();
  };
  const double sync = waited(0), prefetched = waited(1);
  EXPECT_GT(sync, 6 * 0.029);
  EXPECT_LT(prefetched, sync / 3) << "sync " << sync << " s, prefetched " << prefetched << " s";
}

}  // namespace
}  // namespace pipelab::loader_test
