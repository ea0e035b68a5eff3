#pragma once
/// The random numbers behind augmentation: a splitmix64 stream, so the same seed gives the
/// same crops and flips on every platform and standard library (std::uniform_*_distribution
/// is implementation-defined, and a LibTorch generator costs an operator call per number).
#include <cmath>
#include <cstdint>

#include "core/util/seed.h"

namespace pipelab {

/// A deterministic generator of uniform numbers.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  uint64_t bits() {
    state_ += 0x9E3779B97F4A7C15ULL;  // the splitmix64 sequence: a Weyl step, then the finaliser
    return splitmix64(state_);
  }
  /// Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(bits() >> 11) * 0x1.0p-53; }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n), n > 0 (multiply-shift; the bias is below 2^-40 for any n
  /// an image has).
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(bits()) * static_cast<uint64_t>(n)) >> 64);
  }
  /// True with probability 1/2.
  bool coin() { return (bits() >> 63) != 0; }

 private:
  uint64_t state_;
};

}  // namespace pipelab
