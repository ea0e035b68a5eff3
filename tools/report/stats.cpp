#include "tools/report/stats.h"

#include <algorithm>
#include <cmath>

namespace pipelab::tools {

Stats describe(const std::vector<double>& values) {
  Stats s;
  s.n = static_cast<int>(values.size());
  if (values.empty()) return s;
  double sum = 0;
  for (const double v : values) sum += v;
  s.mean = sum / s.n;
  double squares = 0;
  for (const double v : values) squares += (v - s.mean) * (v - s.mean);
  s.std = s.n > 1 ? std::sqrt(squares / (s.n - 1)) : 0;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  return s;
}

}  // namespace pipelab::tools
