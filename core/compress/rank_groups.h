#pragma once
/// Groups by rank without a sort (core/compress/sort_quant.cpp): element i of `x` joins the
/// group g with first[g] <= rank(i) < first[g+1], where rank orders by (value, index), the
/// order a stable sort gives (ties by position; -0 and +0 are one value).
///
/// float32 goes through two histograms of an order-preserving 32-bit key (its top 16 bits,
/// then the low 16 of the few bins a group boundary falls in), which pin each boundary's
/// exact value and how many of its ties fall below it: four sequential passes, O(n) for any
/// number of groups up to 16. Beyond that, and for other types, nth_element on (value, index)
/// pairs selects each group's first rank, O(n log G).
#include <cstdint>
#include <vector>

namespace pipelab::compress {

void rank_groups(const float* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group);
void rank_groups(const double* x, int64_t n, const std::vector<int64_t>& first, uint8_t* group);

}  // namespace pipelab::compress
