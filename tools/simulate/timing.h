#pragma once
/// Wall-clock timing for the costs the simulator measures on this machine (codecs, blocks).
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace pipelab::sim {

/// Seconds `fn` takes.
inline double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The median of `v` (the upper one of an even count; 0 when empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace pipelab::sim
