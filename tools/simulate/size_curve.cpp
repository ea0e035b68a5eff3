#include "tools/simulate/size_curve.h"

#include <algorithm>

#include "core/util/error.h"

namespace pipelab::sim {

Affine Affine::through(double n1, double y1, double n2, double y2) {
  const double slope = std::max(0.0, (y2 - y1) / (n2 - n1));
  return Affine{std::max(0.0, y2 - slope * n2), slope};
}

double SizeCurve::at(double n) const {
  PIPELAB_ASSERT(!examples.empty() && examples.size() == values.size(), "a curve of measured points");
  if (examples.size() == 1) return values[0];
  // The segment that holds n, or the end one beyond either end.
  size_t i = 1;
  while (i + 1 < examples.size() && n > examples[i]) ++i;
  return Affine::through(examples[i - 1], values[i - 1], examples[i], values[i]).at(n);
}

}  // namespace pipelab::sim
