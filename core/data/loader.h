#pragma once
/// Turns a dataset into the mini-batches of each epoch: a seeded permutation per epoch
/// (the same for a given seed and epoch, whatever ran before), fixed-size batches, and
/// the last partial batch dropped in training (as the reference code does, docs/schemes.md, "SpecTrain: common
/// settings").
///
/// Background worker threads build the next `prefetch` batches while training runs, so a
/// step waits only when the data cannot keep up. A batch depends only on (seed, epoch,
/// index) — its examples and its augmentation seed — so prefetched batches are
/// bit-identical to the ones the single-threaded loader (`workers: 0`) builds.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/config/fields.h"
#include "core/data/dataset.h"

namespace pipelab {

/// How batches are built in the background (`run.loader`).
struct PrefetchOptions {
  /// Measured on 2 cores (tools/bench/bench_loader.cpp, docs/models-and-data.md, "Datasets"): one worker
  /// hides CIFAR-10 augmentation behind training; a second competes with LibTorch's
  /// intra-op threads for the same cores and gains nothing there.
  int workers = 1;
  int prefetch = 4;
  /// Batches in page-locked host memory, so that their copies to a GPU are DMA transfers the
  /// launching thread does not wait for (PyTorch's DataLoader(pin_memory=True)). `auto`: when
  /// a stage is on a CUDA device (RunBuilder resolves it).
  enum class Pin { Auto, On, Off };
  Pin pin_memory = Pin::Auto;
  template <class V>
  void fields(V& v) {
    v("workers", workers, "threads that build upcoming batches (0: build each batch when it is needed)",
      InRange{0, 64});
    v("prefetch", prefetch, "batches built ahead of the one training needs", InRange{1, 1024});
    v.choice("pin_memory", pin_memory, Choices<Pin>{{"auto", Pin::Auto}, {"true", Pin::On}, {"false", Pin::Off}},
             "batches in page-locked host memory, copied to the GPU without blocking the host (auto: when a "
             "stage is on a CUDA device)");
  }
};

/// How a loader orders and batches one split.
struct LoaderOptions {
  /// `{batch_size, shuffle, drop_last, seed}` with the default prefetching, or all five.
  LoaderOptions(int64_t batch_size = 1, bool shuffle = true, bool drop_last = true, uint64_t seed = 0,
                PrefetchOptions prefetch = {})
      : batch_size(batch_size), shuffle(shuffle), drop_last(drop_last), seed(seed), prefetch(prefetch) {}
  int64_t batch_size;
  bool shuffle;
  bool drop_last;
  uint64_t seed;
  PrefetchOptions prefetch;
  /// Resolved `prefetch.pin_memory`: each batch's tensors are pinned where they are built.
  bool pin = false;
  /// Whether the workers go on into the next epoch near this one's end: a training loader's
  /// next epoch follows, an evaluation loader restarts its one pass.
  bool across_epochs = true;
};

/// The batches of one split, epoch by epoch, optionally built ahead by worker threads.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches per epoch.
  int64_t batches() const;
  int64_t examples() const { return dataset_->size(); }
  /// Whether its batches carry a document layout (ragged text).
  bool has_documents() const { return dataset_->has_documents(); }
  /// Fixes the order of epoch `epoch` and starts building its first batches. The epoch after
  /// the current one keeps the batches already built ahead for it (a GPU step does not wait
  /// at each epoch's start while the workers refill).
  void start_epoch(int epoch);
  /// Batch j of the current epoch. Thread-safe; asking in order 0, 1, 2, ... gets the
  /// prefetched batches, any other order builds the batch on the calling thread. A
  /// dataset error raised on a worker is rethrown here.
  Batch batch(int64_t j) const;
  /// The example indices of batch j of epoch `epoch`, without building it. Thread-safe.
  at::Tensor example_ids(int epoch, int64_t j) const;
  /// Batch j of epoch `epoch`, built on the calling thread whatever the current epoch
  /// (the same bits as batch(j) in that epoch). Thread-safe.
  Batch batch_of(int epoch, int64_t j) const;
  /// The epoch start_epoch() fixed last.
  int epoch() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return epoch_;
  }
  /// Seconds the callers of batch() spent waiting for (or building) batches since the
  /// last call: a training step's data wait.
  double take_wait_seconds();

 private:
  /// One batch to build: everything it depends on is copied in, so an old epoch's task
  /// finishing late cannot touch the new epoch.
  struct Task {
    uint64_t generation;
    int epoch;
    int64_t index;  ///< within its epoch
    std::vector<int64_t> examples;
    uint64_t seed;
  };
  /// A batch that is queued, being built, or done.
  struct Slot {
    bool done = false;
    Batch batch;
    std::exception_ptr error;
  };

  /// The task at queue position k: batch k of the current epoch, or batch k - batches() of
  /// the next one (built ahead across the epoch's end).
  Task task(int64_t k) const;
  /// The augmentation seed of batch j of epoch `epoch`.
  uint64_t seed_of(int epoch, int64_t j) const;
  /// The permutation of epoch `epoch` (seeded by it alone).
  std::vector<int64_t> order_of(int epoch) const;
  Batch build(const Task& t) const;
  /// Queues the positions in [next, next + prefetch) not yet queued, into the next epoch
  /// where they pass this one's end. Caller holds mutex_.
  void top_up() const;
  void work();
  void stop_workers();

  std::shared_ptr<Dataset> dataset_;
  LoaderOptions options_;
  int epoch_ = 0;
  std::vector<int64_t> order_;
  mutable std::vector<int64_t> next_order_;  ///< the next epoch's, once a batch of it was queued
  mutable int ids_epoch_ = -1;            ///< example_ids' other epoch
  mutable std::vector<int64_t> ids_order_;

  mutable std::mutex mutex_;
  mutable std::condition_variable work_ready_, batch_ready_;
  mutable std::deque<Task> queue_;
  mutable std::map<std::pair<int, int64_t>, Slot> slots_;  ///< this generation's, by (epoch, index)
  mutable int64_t next_ = 0;               ///< the batch expected to be asked for next
  mutable int64_t queued_until_ = 0;       ///< positions below this one were queued (task())
  uint64_t generation_ = 0;
  bool stopping_ = false;
  mutable double wait_seconds_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace pipelab
