#pragma once
/// The toy pipeline of docs/schemes.md, "Toy pipeline", run through real Stages, scheme policies
/// and the sequential executor: stage r holds scalars (a_r, b_r) and computes u = a_r h,
/// out = b_r u; the last stage's loss is (y - t)^2 / 2; batch size 1; float64.
#include <string>
#include <vector>

#include "core/exec/executor.h"

namespace pipelab::testing {

struct ToyConfig {
  std::vector<double> init;  ///< a0, b0, a1, b1, ...
  double momentum = 0, weight_decay = 0, lr = 0.1;
  int epochs = 1;
  int examples = 4;  ///< mini-batches per epoch: the four (x, t) pairs, cycled
  /// Blocks y = x + w and the loss mean(out): every weight's gradient is 1 at every step.
  bool constant_gradient = false;
  /// Blocks y = x + w^2 / 2 and the loss mean(out): every weight's gradient is the weight
  /// itself, i.e. each weight descends f(w) = w^2 / 2 on its own (the delayed-Nesterov
  /// oracle of docs/schemes.md, "Numbered oracles").
  bool quadratic = false;
  /// As `quadratic`, but each gradient is the weight the forward read, whatever the backward
  /// reads: the delayed-gradient model g_j = grad f(W_(j - tau)) of docs/schemes.md, "Numbered oracles"'s
  /// pipelined-backprop oracle.
  bool quadratic_at_forward = false;
  /// Every stage but the last computes h = a_r x only and has the auxiliary head z = b_r h
  /// with the loss (z - t)^2 / 2: the scalar modules of decoupled greedy learning's oracle
  /// (docs/schemes.md, "Numbered oracles"). The last stage is unchanged: its b is the classifier.
  bool greedy_heads = false;
  /// The optimizer section (default: SGD with the fields above).
  std::string optimizer;
};

struct ToyResult {
  std::vector<double> weights;  ///< a0, b0, a1, b1, ... at the end
  std::vector<double> losses;   ///< per mini-batch, in order, all epochs
  std::vector<std::vector<StageMetric>> metrics;  ///< per stage, everything the policies recorded
};

/// Trains the toy with `scheme_yaml` (e.g. "{type: pipedream, vertical_sync: true}") on
/// (x, t) = (1, 0.5), (2, -1), (-1, 0), (0.5, 1), one schedule run per epoch (flush).
ToyResult run_toy(const std::string& scheme_yaml, const ToyConfig& config);

}  // namespace pipelab::testing
