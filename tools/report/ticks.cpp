#include "tools/report/ticks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pipelab::tools {

double nice_number(double x, bool round) {
  const double exp = std::floor(std::log10(x));
  const double f = x / std::pow(10.0, exp);  // in [1, 10)
  double nice;
  if (round) {
    nice = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  } else {
    nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  }
  return nice * std::pow(10.0, exp);
}

Ticks nice_ticks(double lo, double hi, int target, bool integer) {
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  Ticks t;
  const double range = nice_number(hi - lo, false);
  t.step = nice_number(range / std::max(1, target - 1), true);
  if (integer) t.step = std::max(t.step, 1.0);
  // Whole multiples of the step, computed from integers so no rounding drift creeps in.
  const long first = static_cast<long>(std::floor(lo / t.step + 1e-9));
  const long last = static_cast<long>(std::ceil(hi / t.step - 1e-9));
  t.lo = static_cast<double>(first) * t.step;
  t.hi = static_cast<double>(last) * t.step;
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(t.step) + 1e-9)));
  // Very large or very small values in exponent form with the digits the step needs: a loss
  // of 1e300 must not make 300-digit labels.
  const double magnitude = std::max(std::fabs(t.lo), std::fabs(t.hi));
  const bool exponent = magnitude >= 1e6 || (t.step < 1e-4 && magnitude > 0);
  const int digits = std::clamp(static_cast<int>(std::floor(std::log10(magnitude) + 1e-9) -
                                                 std::floor(std::log10(t.step) + 1e-9)) + 1,
                                1, 15);
  for (long k = first; k <= last; ++k) {
    const double v = static_cast<double>(k) * t.step;
    t.values.push_back(v);
    if (exponent) {
      t.labels.push_back(v == 0 ? "0" : fmt::format("{:.{}g}", v, digits));
      continue;
    }
    std::string label = fmt::format("{:.{}f}", v, decimals);
    if (label.find_first_not_of("-0.") == std::string::npos)
      label = decimals ? fmt::format("{:.{}f}", 0.0, decimals) : "0";
    t.labels.push_back(label);
  }
  return t;
}

}  // namespace pipelab::tools
