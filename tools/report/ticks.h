#pragma once
/// "Nice" axis ticks: steps of 1, 2 or 5 x 10^k covering a data range (Heckbert, "Nice
/// numbers for graph labels", Graphics Gems, 1990).
#include <string>
#include <vector>

namespace pipelab::tools {

struct Ticks {
  double lo = 0, hi = 1, step = 1;  ///< the axis runs from lo to hi, both multiples of step
  std::vector<double> values;       ///< lo, lo + step, ..., hi
  std::vector<std::string> labels;  ///< the values with as many decimals as the step needs
};

/// About `target` ticks covering [lo, hi]. `integer` keeps the step >= 1 (epochs). An
/// empty range is widened around its value.
Ticks nice_ticks(double lo, double hi, int target = 6, bool integer = false);

/// 1, 2, 5 or 10 times a power of ten near `x` > 0: the nearest when `round`, else the
/// smallest not below `x`.
double nice_number(double x, bool round);

}  // namespace pipelab::tools
