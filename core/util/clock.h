#pragma once
/// Wall-clock seconds for a run's own figures (epoch times, throughput).
#include <chrono>

namespace pipelab {

/// Seconds from `t` to now, on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace pipelab
