#pragma once
/// One long-lived thread per stage for the threaded executor. Threads outlive schedule
/// runs so that LibTorch's per-thread state (the OpenMP team behind intra-op parallelism,
/// the thread-local dropout generator scope) is set up once, not once per step.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pipelab {

class StageThreads {
 public:
  /// `intra_op_threads` > 0 sets LibTorch's intra-op thread count on each stage thread,
  /// so that `count` concurrent stages use count x intra_op_threads cores in all.
  StageThreads(int count, int intra_op_threads);
  ~StageThreads();
  StageThreads(const StageThreads&) = delete;
  StageThreads& operator=(const StageThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  /// Runs job(r) on thread r for every r and returns when all are done. When a job throws,
  /// `on_failure` runs once (it should make the other jobs stop waiting), and run()
  /// rethrows the first exception that is not pipelab::Cancelled.
  void run(const std::function<void(int)>& job, const std::function<void()>& on_failure);

 private:
  void loop(int r, int intra_op_threads);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  const std::function<void()>* on_failure_ = nullptr;
  int64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;      ///< the first failure
  bool error_is_cancel_ = false;  ///< error_ is a Cancelled (replaced by a real one if any)
};

}  // namespace pipelab
