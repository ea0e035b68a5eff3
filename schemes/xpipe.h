#pragma once
/// XPipe's version difference (docs/schemes.md, "xpipe"; Guan et al., XPipe, arXiv:1911.04610,
/// second-hand) as a pure function, so that tests can hold it to its oracle (docs/schemes.md, "Numbered oracles"). For
/// GPU (stage) r of N with T micro-batches per mini-batch:
///   s_fwd = round((N + T - r/2 - 2) / T),   s_bwd = round((T + floor(r/2) - 1) / T).
/// Both the r/2 term of s_fwd and the rounding are ambiguous in the source (UNVERIFIED). The
/// defaults, ceil(r/2) and round-half-up, are the reading under which T = 1 gives SpecTrain
/// v1's s_f = floor(r/2) + w_r and s_b = floor(r/2) for every r; the other readings are options.
/// Integer arithmetic throughout (halves are exact), so a tie is a tie.
#include <cstdint>

namespace pipelab::xpipe {

/// How s_fwd reads r/2: ceil(r/2) (default) or the real number r/2.
enum class HalfStage { Ceil, Real };
/// How a quotient ending in exactly .5 rounds: up (default) or to the even neighbour.
enum class Rounding { HalfUp, HalfEven };

struct VersionDifference {
  int forward = 0;   ///< s_fwd: updates the forward's weights are predicted ahead
  int backward = 0;  ///< s_bwd: updates the backward's weights are predicted ahead
};

/// round(num / den) for num >= 0, den > 0.
inline int64_t round_quotient(int64_t num, int64_t den, Rounding rounding) {
  const int64_t q = num / den, twice_rest = 2 * (num % den);
  if (twice_rest > den) return q + 1;
  if (twice_rest < den) return q;
  return rounding == Rounding::HalfUp ? q + 1 : q + (q % 2);
}

/// The version difference for stage r of n stages, t micro-batches per mini-batch
/// (n, t >= 1, 0 <= r < n).
inline VersionDifference version_difference(int r, int n, int t, HalfStage half = HalfStage::Ceil,
                                            Rounding rounding = Rounding::HalfUp) {
  // s_fwd in halves: (2 (N + T - 2) - 2 r/2) / 2T, with 2 r/2 = 2 ceil(r/2) or r.
  const int64_t twice_half = half == HalfStage::Ceil ? 2 * ((r + 1) / 2) : r;
  VersionDifference s;
  s.forward = static_cast<int>(round_quotient(2 * (int64_t{n} + t - 2) - twice_half, 2 * int64_t{t}, rounding));
  s.backward = static_cast<int>(round_quotient(int64_t{t} + r / 2 - 1, t, rounding));
  return s;
}

}  // namespace pipelab::xpipe
