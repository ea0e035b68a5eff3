#include "tools/simulate/nnls.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/util/error.h"

namespace pipelab::sim {
namespace {

/// The least-squares solution over the columns in `passive` (the others 0).
std::vector<double> solve_on(const at::Tensor& a, const at::Tensor& b, const std::vector<char>& passive) {
  std::vector<int64_t> columns;
  for (size_t j = 0; j < passive.size(); ++j) {
    if (passive[j]) columns.push_back(static_cast<int64_t>(j));
  }
  std::vector<double> out(passive.size(), 0.0);
  if (columns.empty()) return out;
  const at::Tensor sub = a.index_select(1, at::tensor(columns, at::kLong));
  const at::Tensor z = std::get<0>(at::linalg_lstsq(sub, b.unsqueeze(1), c10::nullopt, "gelsd")).squeeze(1);
  for (size_t k = 0; k < columns.size(); ++k) out[static_cast<size_t>(columns[k])] = z[static_cast<int64_t>(k)].item<double>();
  return out;
}

/// A^T (b - A x): the descent direction's components.
std::vector<double> gradient(const at::Tensor& a, const at::Tensor& b, const std::vector<double>& x) {
  const at::Tensor residual = b - at::mv(a, at::tensor(x, at::kDouble));
  const at::Tensor w = at::mv(a.t(), residual);
  return std::vector<double>(w.data_ptr<double>(), w.data_ptr<double>() + w.numel());
}

}  // namespace

std::vector<double> nnls(const std::vector<double>& a_rows, const std::vector<double>& b_values) {
  PIPELAB_ASSERT(!b_values.empty() && a_rows.size() % b_values.size() == 0, "nnls: {} matrix entries for {} rows",
                 a_rows.size(), b_values.size());
  const auto rows = static_cast<int64_t>(b_values.size());
  const int64_t cols = static_cast<int64_t>(a_rows.size()) / rows;
  const at::Tensor a = at::tensor(a_rows, at::kDouble).view({rows, cols});
  const at::Tensor b = at::tensor(b_values, at::kDouble);
  const double scale = std::max(1.0, a.abs().max().item<double>() * b.abs().max().item<double>());
  const double tolerance = 1e-12 * scale * static_cast<double>(rows * cols);
  std::vector<double> x(static_cast<size_t>(cols), 0.0);
  std::vector<char> passive(static_cast<size_t>(cols), 0);
  for (int64_t outer = 0; outer < 3 * cols + 10; ++outer) {
    const std::vector<double> w = gradient(a, b, x);
    int64_t best = -1;
    for (int64_t j = 0; j < cols; ++j) {
      if (!passive[static_cast<size_t>(j)] && w[static_cast<size_t>(j)] > tolerance &&
          (best < 0 || w[static_cast<size_t>(j)] > w[static_cast<size_t>(best)])) {
        best = j;
      }
    }
    if (best < 0) break;
    passive[static_cast<size_t>(best)] = 1;
    // Move towards the unconstrained solution on the passive set, dropping the columns that
    // would turn negative, until it is feasible.
    for (int64_t inner = 0; inner <= cols; ++inner) {
      const std::vector<double> z = solve_on(a, b, passive);
      double alpha = 1.0;
      for (size_t j = 0; j < z.size(); ++j) {
        if (passive[j] && z[j] <= 0) alpha = std::min(alpha, x[j] / (x[j] - z[j]));
      }
      for (size_t j = 0; j < z.size(); ++j) x[j] += alpha * (z[j] - x[j]);
      if (alpha >= 1.0) break;
      for (size_t j = 0; j < x.size(); ++j) {
        if (passive[j] && x[j] <= 1e-15 * std::max(1.0, std::abs(z[j]))) {
          passive[j] = 0;
          x[j] = 0;
        }
      }
    }
  }
  for (double& v : x) v = std::max(0.0, v);
  return x;
}

}  // namespace pipelab::sim
