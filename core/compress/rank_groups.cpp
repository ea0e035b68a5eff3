#include "core/compress/rank_groups.h"

#include <algorithm>
#include <cstring>

namespace pipelab::compress {
namespace {

constexpr uint32_t kBins = 1 << 16;
constexpr uint8_t kSplit = 255;  // a bin a boundary falls in: its elements are placed one by one

/// Orders as the float does (-0 as +0), as an unsigned integer: negatives have every bit
/// flipped, positives the sign bit set (branch-free: a layer's zeros mixed with the rest).
uint32_t key_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  u &= -static_cast<uint32_t>(u != 0x80000000u);
  return u ^ (static_cast<uint32_t>(-static_cast<int32_t>(u >> 31)) | 0x80000000u);
}

float value_of(uint32_t key) {
  const uint32_t u = key & 0x80000000u ? key ^ 0x80000000u : ~key;
  float v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

/// A group boundary: the rank where a group starts, and where that rank falls.
struct Boundary {
  int64_t rank = 0;
  uint32_t bin = kBins;    ///< top 16 bits of the key at that rank (kBins: past every element)
  uint32_t key = 0;        ///< the key at that rank
  int64_t ties_below = 0;  ///< elements of that key (by position) below the boundary
  uint32_t below_key = 0;  ///< the key at rank - 1 when it lies in the same bin (else 0)
  bool below_found = false;
};

/// What one float32 call needs, kept per thread between calls.
struct Scratch {
  std::vector<uint32_t> below;   ///< [kBins + 1]: elements in the bins before each bin
  std::vector<int32_t> slot;     ///< [kBins]: a boundary bin's row in `low`, else -1
  std::vector<uint32_t> low;     ///< per boundary bin (row 0: the others, unread), its low 16 bits' counts
  std::vector<uint8_t> group_of_bin;
  std::vector<uint32_t> split;   ///< the positions of the elements in boundary bins
};

template <class T>
struct Ranked {
  T v;
  int64_t i;
  bool operator<(const Ranked& o) const { return v < o.v || (v == o.v && i < o.i); }
};

template <class T>
void split_by_rank(std::vector<Ranked<T>>& a, const std::vector<int64_t>& first, size_t lo, size_t hi) {
  if (hi - lo < 2) return;
  const size_t mid = (lo + hi) / 2;
  std::nth_element(a.begin() + first[lo], a.begin() + first[mid], a.begin() + first[hi]);
  split_by_rank(a, first, lo, mid);
  split_by_rank(a, first, mid, hi);
}

template <class T>
void select_groups(const T* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group, T* lo, T* hi) {
  std::vector<Ranked<T>> a(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) a[static_cast<size_t>(k)] = {x[k] == 0 ? T(0) : x[k], k};
  split_by_rank(a, first, 0, first.size() - 1);
  for (size_t g = 0; g + 1 < first.size(); ++g) {
    T bottom = T(0), top = T(0);  // an empty group's
    for (int64_t k = first[g]; k < first[g + 1]; ++k) {
      const Ranked<T>& r = a[static_cast<size_t>(k)];
      group[r.i] = static_cast<uint8_t>(g);
      bottom = k == first[g] ? r.v : std::min(bottom, r.v);
      top = k == first[g] ? r.v : std::max(top, r.v);
    }
    lo[g] = bottom;
    hi[g] = top;
  }
}

/// Pass 1: the top bins' counts (as prefix sums) and the smallest and largest key.
void count_bins(const float* x, int64_t n, Scratch& s, uint32_t& min_key, uint32_t& max_key) {
  s.below.assign(kBins + 1, 0);
  uint32_t* below = s.below.data();
  uint32_t mn = ~0u, mx = 0;
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t key = key_of(x[k]);
    ++below[(key >> 16) + 1];
    mn = std::min(mn, key);
    mx = std::max(mx, key);
  }
  for (uint32_t b = 0; b < kBins; ++b) below[b + 1] += below[b];
  min_key = mn;
  max_key = mx;
}

/// Pass 2: the low 16 bits within the bins a boundary falls in pin its exact key, its ties
/// below it, and the key just below it when that lies in the same bin.
void pin_boundaries(const float* x, int64_t n, std::vector<Boundary>& bounds, Scratch& s) {
  s.slot.assign(kBins, -1);
  std::vector<uint32_t> slot_bins;
  for (const Boundary& bd : bounds) {
    if (bd.bin < kBins && s.slot[bd.bin] < 0) {
      s.slot[bd.bin] = static_cast<int32_t>(slot_bins.size());
      slot_bins.push_back(bd.bin);
    }
  }
  if (slot_bins.empty()) return;
  s.low.assign((slot_bins.size() + 1) * kBins, 0);
  uint32_t* low = s.low.data();
  const int32_t* slot = s.slot.data();
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t key = key_of(x[k]);
    ++low[static_cast<size_t>(slot[key >> 16] + 1) * kBins + (key & 0xffff)];
  }
  for (Boundary& bd : bounds) {
    if (bd.bin == kBins) continue;
    const uint32_t* counts = low + static_cast<size_t>(s.slot[bd.bin] + 1) * kBins;
    int64_t less = s.below[bd.bin];
    uint32_t l = 0;
    while (less + counts[l] <= bd.rank) less += counts[l++];
    bd.key = (bd.bin << 16) | l;
    bd.ties_below = bd.rank - less;
    for (uint32_t m = l; m-- > 0 && !bd.below_found;) {
      if (counts[m]) {
        bd.below_key = (bd.bin << 16) | m;
        bd.below_found = true;
      }
    }
  }
}

/// The largest key below `key` (there is one): one masked maximum over the elements.
uint32_t largest_below(const float* x, int64_t n, uint32_t key) {
  uint32_t m = 0;
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t c = key_of(x[k]);
    m = std::max(m, c < key ? c : 0u);
  }
  return m;
}

/// Pass 3: each element's group from its bin; the elements of a boundary's bin are listed (in
/// position order) and placed after, by their key and their place among ties.
void assign_groups(const float* x, int64_t n, const std::vector<Boundary>& bounds, Scratch& s, uint8_t* group) {
  s.group_of_bin.resize(kBins);
  {
    // A bin no boundary falls in lies in one group: the boundaries in bins below it.
    size_t passed = 0;
    std::vector<uint32_t> bins;
    for (const Boundary& bd : bounds) bins.push_back(bd.bin);
    std::sort(bins.begin(), bins.end());
    for (uint32_t b = 0; b < kBins; ++b) {
      while (passed < bins.size() && bins[passed] < b) ++passed;
      s.group_of_bin[b] = s.slot[b] >= 0 ? kSplit : static_cast<uint8_t>(passed);
    }
  }
  if (s.split.size() < static_cast<size_t>(n) + 1) s.split.resize(static_cast<size_t>(n) + 1);
  const uint8_t* table = s.group_of_bin.data();
  uint32_t* split = s.split.data();
  int64_t m = 0;
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t whole = table[key_of(x[k]) >> 16];
    group[k] = whole;
    split[m] = static_cast<uint32_t>(k);
    m += whole == kSplit;
  }
  std::vector<int64_t> seen(bounds.size(), 0);  // elements of bounds[b].key met so far
  for (int64_t j = 0; j < m; ++j) {
    const int64_t k = split[j];
    const uint32_t key = key_of(x[k]);
    int g = 0;
    for (size_t b = 0; b < bounds.size(); ++b) {
      const bool here = bounds[b].bin != kBins;
      const bool tie = here && bounds[b].key == key;
      g += (here && bounds[b].key < key) + (tie && seen[b] >= bounds[b].ties_below);
      seen[b] += tie;
    }
    group[k] = static_cast<uint8_t>(g);
  }
}

}  // namespace

void rank_groups(const double* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group, double* lo,
                 double* hi) {
  select_groups(x, n, first, group, lo, hi);
}

void rank_groups(const float* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group, float* lo, float* hi) {
  // The second histograms take 256 KiB each: beyond 16 groups, select instead (and beyond
  // 32-bit counts).
  if (first.size() > 17 || n >= (int64_t{1} << 32)) return select_groups(x, n, first, group, lo, hi);
  // Reused across calls, per thread: the codecs of every stage run at once on their threads,
  // and allocating the histograms each message would cost more than ranking it.
  thread_local Scratch s;
  uint32_t min_key = 0, max_key = 0;
  count_bins(x, n, s, min_key, max_key);
  std::vector<Boundary> bounds;
  for (size_t g = 1; g + 1 < first.size(); ++g) {
    Boundary bd;
    bd.rank = first[g];
    if (bd.rank < n) {
      bd.bin = static_cast<uint32_t>(std::upper_bound(s.below.begin(), s.below.end(), static_cast<uint32_t>(bd.rank)) -
                                     s.below.begin() - 1);
    }
    bounds.push_back(bd);
  }
  pin_boundaries(x, n, bounds, s);
  // Group g runs from the key at rank first[g] to the key at rank first[g+1] - 1: a boundary's
  // own key, or the one just below it (the same key when ties straddle the boundary).
  const size_t groups = first.size() - 1;
  for (size_t g = 0; g < groups; ++g) {
    if (first[g] >= first[g + 1]) {
      lo[g] = hi[g] = 0.0f;
      continue;
    }
    lo[g] = value_of(g == 0 ? min_key : bounds[g - 1].key);
    if (g + 1 == groups || first[g + 1] >= n) {
      hi[g] = value_of(max_key);
      continue;
    }
    const Boundary& next = bounds[g];
    hi[g] = value_of(next.ties_below > 0 ? next.key : next.below_found ? next.below_key : largest_below(x, n, next.key));
  }
  assign_groups(x, n, bounds, s, group);
}

}  // namespace pipelab::compress
