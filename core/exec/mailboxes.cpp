#include "core/exec/mailboxes.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/util/error.h"

namespace pipelab {

Mailboxes::Mailboxes(int stages, double spin_seconds)
    : boxes_(static_cast<size_t>(stages)), spin_seconds_(spin_seconds) {}

void Mailboxes::send(int, int to, char kind, int mb, Parcel p) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& box = boxes_.at(static_cast<size_t>(to));
    const bool fresh = box.emplace(std::make_pair(kind, mb), std::move(p)).second;
    PIPELAB_ASSERT(fresh, "stage {} got a second {} message for micro-batch {}", to, kind, mb);
    high_water_ = std::max(high_water_, box.size());
  }
  // Every waiter re-checks its own key; with a handful of stages this is cheaper than a
  // condition variable per key.
  changed_.notify_all();
}

Parcel Mailboxes::receive(int to, int, char kind, int mb) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto& box = boxes_.at(static_cast<size_t>(to));
  const auto key = std::make_pair(kind, mb);
  auto it = box.end();
  const auto arrived = [&] { return cancelled_ || (it = box.find(key)) != box.end(); };
  if (!arrived()) {
    // Poll a little before sleeping: a wake-up from a condition variable costs tens of
    // microseconds, which small actions feel (tools/bench/bench_executors.cpp --width 64).
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(spin_seconds_);
    while (!arrived() && std::chrono::steady_clock::now() < until) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    changed_.wait(lock, arrived);
  }
  if (cancelled_) throw Cancelled();
  Parcel p = std::move(it->second);
  box.erase(it);
  return p;
}

void Mailboxes::collective_barrier(int group, int members) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (cancelled_) throw Cancelled();
  Round& r = rounds_[group];
  const int64_t round = r.number;
  if (++r.arrived == members) {
    r.arrived = 0;
    ++r.number;
    changed_.notify_all();
    return;
  }
  changed_.wait(lock, [&] { return cancelled_ || r.number != round; });
  if (cancelled_) throw Cancelled();
}

void Mailboxes::cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
}

bool Mailboxes::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

size_t Mailboxes::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& box : boxes_) n += box.size();
  return n;
}

size_t Mailboxes::high_water() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return high_water_;
}

}  // namespace pipelab
