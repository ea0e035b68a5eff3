#pragma once
/// Groups by rank without a sort (core/compress/sort_quant.cpp): element i of `x` joins the
/// group g with first[g] <= rank(i) < first[g+1], where rank orders by (value, index), the
/// order a stable sort gives (ties by position; -0 and +0 are one value). `lo[g]` and `hi[g]`
/// get the group's smallest and largest value: the values at its first and last rank (+0 for
/// a zero; 0 for an empty group).
///
/// float32 goes through two histograms of an order-preserving 32-bit key (its top 16 bits,
/// then the low 16 of the few bins a group boundary falls in), which pin each boundary's
/// exact value and how many of its ties fall below it, and so each group's min, and its max
/// (the value just below the next boundary: in the same bin's histogram, else one masked
/// maximum over the keys); the elements of the bins no boundary falls in take their group from
/// a table, the others from their key and place among ties. Sequential passes, O(n) for up to
/// 16 groups; scratch memory is kept per thread between calls (a codec runs every micro-batch).
/// Beyond 16 groups, and for other types, nth_element on (value, index) pairs selects each
/// group's first rank, O(n log G).
#include <cstdint>
#include <vector>

namespace pipelab::compress {

void rank_groups(const float* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group, float* lo, float* hi);
void rank_groups(const double* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group, double* lo,
                 double* hi);

}  // namespace pipelab::compress
