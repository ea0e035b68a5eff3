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

/// The `status` of a run folder's summary.json ("finished", "diverged"), "" if there is none.
std::string summary_status(const std::string& dir);

}  // namespace pipelab::tools
