#include "core/run/classification_metrics.h"

#include <ATen/ATen.h>

#include <cmath>

namespace pipelab {

double matthews_correlation(const at::Tensor& confusion) {
  const at::Tensor m = confusion.to(at::kDouble);
  const double s = m.sum().item<double>(), c = m.trace().item<double>();
  const at::Tensor predicted = m.sum(0), target = m.sum(1);
  const double pt = (predicted * target).sum().item<double>();
  const double denominator = (s * s - predicted.pow(2).sum().item<double>()) * (s * s - target.pow(2).sum().item<double>());
  return denominator > 0 ? (c * s - pt) / std::sqrt(denominator) : 0.0;
}

}  // namespace pipelab
