#pragma once
/// Costs as functions of a micro-batch's examples: a line, and a curve through points
/// measured at several sizes (a block's time is far from a line through the origin: its
/// kernels' fixed costs, and small batches that use the cores poorly).
#include <vector>

namespace pipelab::sim {

/// What one action of one block costs for `n` examples (seconds, or bytes): fixed +
/// per_example * n.
struct Affine {
  double fixed = 0, per_example = 0;
  double at(double n) const { return fixed + per_example * n; }
  /// The line through (`n1`, `y1`) and (`n2`, `y2`), n1 < n2; a slope below zero (noise on a
  /// block that takes microseconds) is a constant.
  static Affine through(double n1, double y1, double n2, double y2);
};

/// A cost measured at several micro-batch sizes: straight lines between the measured points
/// and, beyond the ends, the end segment's line (a slope below zero, noise on a block that
/// takes microseconds, is flat; never below zero).
struct SizeCurve {
  std::vector<double> examples, values;  ///< examples ascending, one value each
  double at(double n) const;
  bool empty() const { return examples.empty(); }
};

}  // namespace pipelab::sim
