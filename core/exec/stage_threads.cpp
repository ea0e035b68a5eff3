#include "core/exec/stage_threads.h"

#include <ATen/Parallel.h>

#include "core/exec/transport.h"

namespace pipelab {

StageThreads::StageThreads(int count, int intra_op_threads) {
  for (int r = 0; r < count; ++r) threads_.emplace_back([this, r, intra_op_threads] { loop(r, intra_op_threads); });
}

StageThreads::~StageThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void StageThreads::run(const std::function<void(int)>& job, const std::function<void()>& on_failure) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &job;
  on_failure_ = &on_failure;
  error_ = nullptr;
  error_is_cancel_ = false;
  running_ = size();
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  on_failure_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void StageThreads::loop(int r, int intra_op_threads) {
  // OpenMP's team size is per calling thread: this bounds what this stage's ops use.
  if (intra_op_threads > 0) at::set_num_threads(intra_op_threads);
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    bool cancelled = false;
    try {
      (*job)(r);
    } catch (const Cancelled&) {
      error = std::current_exception();
      cancelled = true;
    } catch (...) {
      error = std::current_exception();
    }
    bool first_failure = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error && (!error_ || (error_is_cancel_ && !cancelled))) {
        first_failure = !error_;
        error_ = error;
        error_is_cancel_ = cancelled;
      }
    }
    // Outside the lock: cancelling wakes stages that may be about to finish and report.
    if (first_failure) (*on_failure_)();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--running_ == 0) done_.notify_all();
    }
  }
}

}  // namespace pipelab
