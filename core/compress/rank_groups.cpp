#include "core/compress/rank_groups.h"

#include <algorithm>
#include <cstring>

namespace pipelab::compress {
namespace {

constexpr uint32_t kBins = 1 << 16;

/// Orders as the float does (-0 as +0), as an unsigned integer.
uint32_t key_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  u = v == 0 ? 0u : u;  // -0 as +0
  // Negative: all bits flipped; positive: the sign bit set (branch-free).
  return u ^ (static_cast<uint32_t>(-static_cast<int32_t>(u >> 31)) | 0x80000000u);
}

/// A group boundary: the rank where a group starts, and where that rank falls.
struct Boundary {
  int64_t rank = 0;
  uint32_t bin = kBins;  ///< top 16 bits of the key at that rank (kBins: past every element)
  uint32_t key = 0;      ///< the key at that rank
  int64_t ties_below = 0;  ///< elements of that key (by position) below the boundary
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
void select_groups(const T* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group) {
  std::vector<Ranked<T>> a(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) a[static_cast<size_t>(k)] = {x[k] == 0 ? T(0) : x[k], k};
  split_by_rank(a, first, 0, first.size() - 1);
  for (size_t g = 0; g + 1 < first.size(); ++g) {
    for (int64_t k = first[g]; k < first[g + 1]; ++k) group[a[static_cast<size_t>(k)].i] = static_cast<uint8_t>(g);
  }
}

}  // namespace

void rank_groups(const double* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group) {
  select_groups(x, n, first, group);
}

void rank_groups(const float* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group) {
  // The second histograms take 256 KiB each: beyond 16 groups, select instead.
  if (first.size() > 17) return select_groups(x, n, first, group);
  // Pass 1: how many elements per top bin, and where each boundary's rank falls.
  std::vector<int64_t> below(kBins + 1, 0);
  for (int64_t k = 0; k < n; ++k) ++below[(key_of(x[k]) >> 16) + 1];
  for (uint32_t b = 0; b < kBins; ++b) below[b + 1] += below[b];
  std::vector<Boundary> bounds;
  for (size_t g = 1; g + 1 < first.size(); ++g) {
    Boundary bd;
    bd.rank = first[g];
    if (bd.rank < n) {
      bd.bin = static_cast<uint32_t>(std::upper_bound(below.begin(), below.end(), bd.rank) - below.begin() - 1);
    }
    bounds.push_back(bd);
  }
  // Pass 2: the low 16 bits within the bins a boundary falls in pin its exact key.
  std::vector<int> slot(kBins, -1);
  std::vector<uint32_t> slot_bins;
  for (const Boundary& bd : bounds) {
    if (bd.bin < kBins && slot[bd.bin] < 0) {
      slot[bd.bin] = static_cast<int>(slot_bins.size());
      slot_bins.push_back(bd.bin);
    }
  }
  std::vector<std::vector<uint32_t>> low(slot_bins.size(), std::vector<uint32_t>(kBins, 0));
  if (!slot_bins.empty()) {
    for (int64_t k = 0; k < n; ++k) {
      const uint32_t key = key_of(x[k]);
      const int s = slot[key >> 16];
      if (s >= 0) ++low[static_cast<size_t>(s)][key & 0xffff];
    }
  }
  for (Boundary& bd : bounds) {
    if (bd.bin == kBins) continue;
    const std::vector<uint32_t>& counts = low[static_cast<size_t>(slot[bd.bin])];
    int64_t less = below[bd.bin];
    uint32_t l = 0;
    while (less + counts[l] <= bd.rank) less += counts[l++];
    bd.key = (bd.bin << 16) | l;
    bd.ties_below = bd.rank - less;
  }
  // A bin no boundary falls in lies in one group: the boundaries in bins below it (255:
  // a boundary's bin, decided per element).
  constexpr uint8_t kSplit = 255;
  std::vector<uint8_t> group_of_bin(kBins, 0);
  {
    size_t passed = 0;
    std::vector<uint32_t> bins;
    for (const Boundary& bd : bounds) bins.push_back(bd.bin);
    std::sort(bins.begin(), bins.end());
    for (uint32_t b = 0; b < kBins; ++b) {
      while (passed < bins.size() && bins[passed] < b) ++passed;
      group_of_bin[b] = slot[b] >= 0 ? kSplit : static_cast<uint8_t>(passed);
    }
  }
  // Pass 3: each element's group; in a boundary's bin, by its key and its place among ties.
  std::vector<int64_t> seen(bounds.size(), 0);  // elements of bounds[b].key met so far
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t key = key_of(x[k]);
    const uint8_t whole = group_of_bin[key >> 16];
    if (whole != kSplit) {
      group[k] = whole;
      continue;
    }
    int g = 0;
    bool tied = false;
    for (size_t b = 0; b < bounds.size(); ++b) {
      if (bounds[b].bin == kBins) continue;
      if (bounds[b].key < key) ++g;
      if (bounds[b].key == key) {
        if (seen[b] >= bounds[b].ties_below) ++g;
        tied = true;
      }
    }
    if (tied) {
      for (size_t b = 0; b < bounds.size(); ++b) seen[b] += bounds[b].bin != kBins && bounds[b].key == key;
    }
    group[k] = static_cast<uint8_t>(g);
  }
}

}  // namespace pipelab::compress
