#pragma once
/// `run.targets`: the values a run aims for (a test accuracy to reach, a loss to get below)
/// and when it reached each: the measured training time and, with `pipelab run --cluster`,
/// the simulated one (docs/time-to-accuracy.md). Time to a target is what the pipeline
/// papers compare schemes by (PipeDream, SpecTrain, PACI): a scheme that trains faster per
/// step but needs more steps may still lose.
#include <optional>
#include <string>
#include <vector>

#include "core/config/config_node.h"
#include "core/config/fields.h"

namespace pipelab {

struct EpochMetrics;

/// The `run.targets:` section. Keys are epochs.csv's columns, in its units: accuracies in
/// percent, losses as the loss.
struct TargetOptions {
  std::optional<double> test_acc, train_acc, test_mcc, test_loss, train_loss;
  template <class V>
  void fields(V& v) {
    v("test_acc", test_acc, "test accuracy to reach, percent (epochs.csv's test_acc)");
    v("train_acc", train_acc, "training accuracy to reach, percent");
    v("test_mcc", test_mcc, "test Matthews correlation x 100 to reach (GLUE CoLA)");
    v("test_loss", test_loss, "test loss to get down to");
    v("train_loss", train_loss, "training loss (an epoch's mean) to get down to");
  }
  bool any() const { return test_acc || train_acc || test_mcc || test_loss || train_loss; }
  /// A value out of its column's range is a ConfigError at its key; an accuracy of at most
  /// 1 is one too, since the column is in percent and 0.9 would mean 0.9%.
  void check(const ConfigNode& node) const;
};

/// When a run first reached one target.
struct TargetReached {
  std::string metric;  ///< epochs.csv's column
  double target = 0;
  bool at_least = true;  ///< accuracies: reached at or above; losses: at or below
  bool reached = false;
  int epoch = 0;  ///< the first evaluation at or past the target
  /// Training time to the target (evaluations left out), summed over the epochs before it
  /// and interpolated linearly inside the epoch that crossed it between the evaluation
  /// before and the one after; reached at the first evaluation, its time (an upper bound).
  double train_seconds = 0;
  double simulated_seconds = 0;  ///< the same on the simulated cluster; NaN without one
  bool interpolated = false;     ///< false: reached at the first evaluation
};

/// "test_acc 90: epoch 3, 41.2 s of training (18.5 s simulated)", or "... not reached in 5 epochs".
std::string describe(const TargetReached& t, int epochs);

/// Each target of `targets` against a run's epochs, in the order of TargetOptions' fields.
std::vector<TargetReached> time_to_targets(const TargetOptions& targets, const std::vector<EpochMetrics>& history);

}  // namespace pipelab
