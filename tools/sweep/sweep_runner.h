#pragma once
/// Runs the cells of a sweep as `pipelab run CELL --resume --quiet` processes, N at once:
/// finished runs are skipped, interrupted ones resume, a diverged run is recorded and the
/// sweep goes on. Results are only ever written by the runs themselves, whole or not at all,
/// so stopping a sweep at any moment loses no finished result and a rerun completes the grid.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "tools/sweep/plan.h"
#include "tools/sweep/run_status.h"

namespace pipelab::tools {

struct SweepRunOptions {
  std::string pipelab;  ///< the `pipelab` executable that runs each cell
  int jobs = 1;         ///< runs at once
  /// Intra-op threads per run when its file leaves run.threads at 0 (0: half the cores over
  /// the jobs, cores / (2 jobs), at least 1: safe on a machine shared with other work).
  int threads = 0;
  bool rerun_changed = false;  ///< rerun (from scratch) runs whose cell changed since they ran
  bool bar = false;            ///< draw a progress bar on stderr (a terminal)
  /// More flags for every run (the simulated clock's: `sweep --cluster`).
  std::vector<std::string> run_flags;
  /// Polled while runs are going; true stops the sweep (running cells end and stay resumable).
  std::function<bool()> stop_requested;
};

/// What a sweep session did.
struct SweepResult {
  int done = 0;         ///< runs that finished in this session
  int skipped = 0;      ///< runs that already had their result
  int diverged = 0;     ///< runs that diverged in this session
  int failed = 0;       ///< runs that ended with an error (see their sweep.log)
  int interrupted = 0;  ///< runs ended early because the sweep was stopped (they resume)
  int not_started = 0;  ///< runs not started because the sweep was stopped
  double seconds = 0;
};

/// Statuses of every run of `plan` (nothing is written).
std::vector<RunStatus> scan_plan(const SweepPlan& plan);

/// Runs what is left of `plan`, printing one line per run start and end to `out` and a
/// summary at the end. A run folder holding results of a different version of its cell is
/// a UserError unless `rerun_changed`; so is a second sweep already running on the same output.
SweepResult run_sweep(const SweepPlan& plan, const SweepRunOptions& options, std::ostream& out);

}  // namespace pipelab::tools
