#pragma once
/// Deterministic seed derivation: independent streams for blocks, shuffles and batches.
#include <cstdint>

namespace pipelab {

/// splitmix64 finaliser.
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// A seed derived from a base seed and two stream ids (63 bits, so it is a valid torch seed).
inline uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b) & 0x7FFFFFFFFFFFFFFFULL;
}

}  // namespace pipelab
