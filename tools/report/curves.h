#pragma once
/// Learning curves from runs' metrics/epochs.csv: one line per run, or per group of runs
/// (their mean, optionally with a min-max band), against epochs or wall-clock time; or, with
/// x = step, training curves from metrics/steps.csv (the loss and LR of every step).
#include <string>
#include <vector>

#include "tools/report/run_index.h"
#include "tools/report/svg_plot.h"

namespace pipelab::tools {

struct CurveOptions {
  std::string metric = "test_acc";    ///< a column of metrics/epochs.csv (steps.csv: loss, lr)
  /// epoch, time (cumulative seconds of the epochs), simulated_time (cumulative simulated
  /// training seconds: `run --cluster`), or step
  std::string x = "epoch";
  std::vector<std::string> group_by;  ///< config key paths; empty: one line per run
  bool band = false;                  ///< a min-max band around each group's mean (all runs as one group
                                      ///< without group_by)
  std::string baseline;               ///< a run (folder) whose final value is drawn as a reference line
};

/// The axis label of an epochs.csv column, with its unit ("test accuracy (%)").
std::string metric_label(const std::string& metric);

/// The chart of `runs`. An unknown metric, x or group key is a UserError; runs without a
/// finished epoch are left out.
LineChart build_curves(const std::vector<RunInfo>& runs, const CurveOptions& options);

}  // namespace pipelab::tools
