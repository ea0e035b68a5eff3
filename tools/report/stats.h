#pragma once
/// Summary statistics of a handful of runs (seeds): what tables and group curves show.
#include <vector>

namespace pipelab::tools {

struct Stats {
  int n = 0;
  double mean = 0;
  double std = 0;  ///< sample standard deviation (divides by n - 1, as pandas and R do); 0 for n < 2
  double min = 0, max = 0;
};

/// The statistics of `values` (all zero for none).
Stats describe(const std::vector<double>& values);

}  // namespace pipelab::tools
