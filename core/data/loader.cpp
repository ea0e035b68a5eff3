#include "core/data/loader.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/util/error.h"
#include "core/util/seed.h"

// A weak reference: resolved to the OpenMP runtime LibTorch loads, null without one.
extern "C" void omp_set_num_threads(int) __attribute__((weak));

namespace pipelab {
namespace {

// A worker runs LibTorch operators single-threaded. With LibTorch's OpenMP backend every
// thread that calls an operator gets its own team of at::get_num_threads() threads, so
// each worker would add a team competing with the training threads for the same cores
// (measured: a worker's first large operator takes the process from 2 to 4 threads on 2
// cores). at::set_num_threads cannot be used: it also changes the count that threads
// started later begin with. So the worker initialises LibTorch's per-thread setting (which
// at::get_num_threads does) and then lowers its own OpenMP count to 1.
void run_operators_single_threaded() {
  at::get_num_threads();
  if (omp_set_num_threads) omp_set_num_threads(1);
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  PIPELAB_ASSERT(options_.batch_size > 0, "batch size {}", options_.batch_size);
  PIPELAB_ASSERT(options_.prefetch.workers >= 0 && options_.prefetch.prefetch > 0, "{} workers, prefetch {}",
                 options_.prefetch.workers, options_.prefetch.prefetch);
  start_epoch(0);
  for (int w = 0; w < options_.prefetch.workers; ++w) workers_.emplace_back([this] { work(); });
  std::lock_guard<std::mutex> lock(mutex_);
  top_up();
}

DataLoader::~DataLoader() { stop_workers(); }

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

int64_t DataLoader::batches() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(int epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The batches of this very epoch are already on their way and none was taken (the
  // runner starts an epoch right after the constructor did): keep them.
  if (epoch == epoch_ && generation_ > 0 && next_ == 0) return;
  const int64_t n = batches();
  if (epoch == epoch_ + 1 && generation_ > 0 && queued_until_ > n) {
    // The next epoch, part of it built ahead: keep its slots and queued tasks, drop the
    // rest (a worker's unfinished task of this epoch finds no slot and is dropped).
    for (auto it = slots_.begin(); it != slots_.end();) it = it->first.first == epoch ? std::next(it) : slots_.erase(it);
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const Task& t) { return t.epoch != epoch; }),
                 queue_.end());
    queued_until_ -= n;
    order_ = std::move(next_order_);
  } else {
    ++generation_;
    queue_.clear();
    slots_.clear();
    queued_until_ = 0;
    order_ = order_of(epoch);
  }
  next_order_.clear();
  next_ = 0;
  epoch_ = epoch;
  top_up();
}

DataLoader::Task DataLoader::task(int64_t k) const {
  const int64_t b = options_.batch_size, n = batches();
  const bool ahead = k >= n;
  if (ahead && next_order_.empty()) next_order_ = order_of(epoch_ + 1);
  const std::vector<int64_t>& order = ahead ? next_order_ : order_;
  const int epoch = ahead ? epoch_ + 1 : epoch_;
  const int64_t j = ahead ? k - n : k;
  const auto first = order.begin() + j * b;
  const auto last = order.begin() + std::min<int64_t>((j + 1) * b, static_cast<int64_t>(order.size()));
  return {generation_, epoch, j, std::vector<int64_t>(first, last), seed_of(epoch, j)};
}

uint64_t DataLoader::seed_of(int epoch, int64_t j) const {
  return mix_seed(options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(j));
}

Batch DataLoader::build(const Task& t) const {
  Batch b = dataset_->get(t.examples, t.seed);
  b.ids = at::tensor(t.examples, at::kLong);
  // Pinned on the worker, off the training thread's path; the caching host allocator keeps
  // each block until the copies made from it have finished.
  if (options_.pin) {
    b.x = b.x.pin_memory();
    if (b.y.defined()) b.y = b.y.pin_memory();
    if (b.documents.defined()) b.documents = b.documents.pin_memory();
  }
  return b;
}

std::vector<int64_t> DataLoader::order_of(int epoch) const {
  const int64_t n = dataset_->size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (!options_.shuffle) {
    std::iota(order.begin(), order.end(), int64_t{0});
    return order;
  }
  at::Generator gen = at::detail::createCPUGenerator(mix_seed(options_.seed, 0x5EED5u, static_cast<uint64_t>(epoch)));
  const at::Tensor perm = at::randperm(n, gen, at::kLong);
  const int64_t* p = perm.data_ptr<int64_t>();
  order.assign(p, p + n);
  return order;
}

at::Tensor DataLoader::example_ids(int epoch, int64_t j) const {
  PIPELAB_ASSERT(j >= 0 && j < batches(), "batch {} of {}", j, batches());
  std::lock_guard<std::mutex> lock(mutex_);
  // The current epoch's order, or the last one asked for (a process whose stages read no
  // inputs never starts the epochs of a never-flushed pipeline).
  if (epoch != epoch_ && epoch != ids_epoch_) {
    ids_order_ = order_of(epoch);
    ids_epoch_ = epoch;
  }
  const std::vector<int64_t>& order = epoch == epoch_ ? order_ : ids_order_;
  const int64_t b = options_.batch_size;
  const auto first = order.begin() + j * b;
  const auto last = order.begin() + std::min<int64_t>((j + 1) * b, static_cast<int64_t>(order.size()));
  return at::tensor(std::vector<int64_t>(first, last), at::kLong);
}

Batch DataLoader::batch_of(int epoch, int64_t j) const {
  const at::Tensor ids = example_ids(epoch, j);
  // build() reads the task alone (the generation only tells a worker's task from a stale one).
  const Task t{0, epoch, j, std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()),
               seed_of(epoch, j)};
  return build(t);
}

void DataLoader::top_up() const {
  if (workers_.empty()) return;
  // At most one epoch ahead: positions past the next epoch's end are never queued.
  const int64_t until = std::min((options_.across_epochs ? 2 : 1) * batches(), next_ + options_.prefetch.prefetch);
  for (int64_t k = std::max(queued_until_, next_); k < until; ++k) {
    Task t = task(k);
    slots_[{t.epoch, t.index}];
    queue_.push_back(std::move(t));
  }
  queued_until_ = std::max(queued_until_, until);
  work_ready_.notify_all();
}

Batch DataLoader::batch(int64_t j) const {
  PIPELAB_ASSERT(j >= 0 && j < batches(), "batch {} of {}", j, batches());
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  const auto waited = [&] {
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Batch out;
  auto it = slots_.find({epoch_, j});
  if (it == slots_.end()) {
    // Not prefetched (no workers, or asked out of order): build it here.
    const Task t = task(j);
    lock.unlock();
    try {
      out = build(t);
    } catch (...) {
      lock.lock();
      waited();
      throw;
    }
    lock.lock();
  } else {
    batch_ready_.wait(lock, [&] { return it->second.done; });
    Slot slot = std::move(it->second);
    slots_.erase(it);
    if (slot.error) {
      waited();
      std::rethrow_exception(slot.error);
    }
    out = std::move(slot.batch);
  }
  next_ = std::max(next_, j + 1);
  top_up();
  waited();
  return out;
}

void DataLoader::work() {
  run_operators_single_threaded();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const Task t = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Slot result;
    try {
      result.batch = build(t);
    } catch (...) {
      result.error = std::current_exception();
    }
    result.done = true;
    lock.lock();
    // A task of an epoch that was restarted meanwhile is dropped.
    if (t.generation != generation_) continue;
    auto it = slots_.find({t.epoch, t.index});
    if (it == slots_.end()) continue;
    it->second = std::move(result);
    batch_ready_.notify_all();
  }
}

double DataLoader::take_wait_seconds() {
  std::lock_guard<std::mutex> lock(mutex_);
  const double w = wait_seconds_;
  wait_seconds_ = 0;
  return w;
}

}  // namespace pipelab
