#pragma once
/// What a sweep finds in a cell's folder before it runs anything: a finished or diverged
/// run (skipped), an interrupted one (resumed from its last finished epoch), nothing yet,
/// or results of a different version of the cell (the sweep file changed since).
#include <string>

#include "tools/sweep/plan.h"

namespace pipelab::tools {

/// The state of one run's folder.
struct RunStatus {
  enum class State { ToDo, Interrupted, Finished, Diverged, Changed };
  State state = State::ToDo;
  int epochs = 0;  ///< epochs recorded in its metrics (finished, diverged, interrupted)
  /// "done", "diverged in epoch 3", "interrupted after epoch 2", "to do", ...
  std::string describe() const;
  /// True when the run has its result (finished or diverged) and is not run again.
  bool has_result() const { return state == State::Finished || state == State::Diverged; }
};

/// Looks at `run.dir`: summary.json (a result), checkpoints/state.pt (interrupted), and
/// whether experiment.yaml still holds `run.experiment`.
RunStatus scan_run(const PlannedRun& run);

/// One line of a running cell's metrics/epochs.csv, for the sweep's progress: its epoch and
/// "train loss 0.4123  test acc 83.41%  2.1s" (a value written as null, a NaN, prints nan).
struct EpochProgress {
  std::string epoch, text;
};
EpochProgress epoch_progress(const std::string& header, const std::string& row);

/// The `status` of a run folder's summary.json ("finished", "diverged"), "" if there is none.
std::string summary_status(const std::string& dir);

}  // namespace pipelab::tools
