#pragma once
/// PipeMare's two techniques as plain functions (Yang et al., "PipeMare: Asynchronous Pipeline
/// Parallel DNN Training", MLSys 2021), so tests can hold them to the oracle values.
#include <algorithm>
#include <cmath>

namespace pipelab::pipemare {

/// T1, learning-rate rescheduling (docs/schemes.md, "pipemare", as AsyncPP's `adjust_learning_rate`
/// implements it): at a stage with forward delay `tau`, the k-th step (1-based) uses the base LR
/// times tau^-(1 - min(k/K, 1)); stages with tau < 1 are unaffected.
inline double lr_factor(int tau, int64_t k, int64_t K) {
  if (tau < 1 || K <= 0) return 1.0;
  const double p = 1.0 - std::min(static_cast<double>(k) / static_cast<double>(K), 1.0);
  return std::pow(static_cast<double>(tau), -p);
}

/// T2's velocity (docs/schemes.md, "pipemare"): an exponential average of the applied weight deltas,
/// delta <- decay * delta + (1 - decay) * (W_new - W_old). Returns the new delta for scalars;
/// the policy applies the same formula tensor-wise.
inline double velocity(double delta, double decay, double applied) { return decay * delta + (1 - decay) * applied; }

}  // namespace pipelab::pipemare
