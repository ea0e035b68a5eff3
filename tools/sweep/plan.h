#pragma once
/// A sweep file turned into the list of runs it stands for, every cell already checked as
/// an experiment: a mistake anywhere fails the whole sweep before anything runs or is written.
#include <string>
#include <vector>

#include "tools/sweep/run_id.h"

namespace pipelab::tools {

/// One cell of a sweep, ready to run.
struct PlannedRun {
  std::string id;            ///< `type=gpipe,stages=4,seed=1`: also the folder name
  std::string dir;           ///< <sweep output>/<id>: the cell's run.output
  std::string experiment;    ///< the cell's experiment file (YAML text, sweep section removed)
  std::vector<Leaf> labels;  ///< the (short name, value) pairs its id is made of
  /// The path the experiment file is written to.
  std::string experiment_path() const { return dir + "/experiment.yaml"; }
};

/// The runs of one sweep file.
struct SweepPlan {
  std::string file;    ///< the sweep file (as given)
  std::string name;    ///< its stem
  std::string output;  ///< sweep.output (default runs/<name>)
  std::vector<PlannedRun> runs;
  /// Exclude and override entries that select no cell of a grid the command line narrowed,
  /// one line each (elsewhere such an entry is a mistake).
  std::vector<std::string> skipped;
};

/// Reads `file` (with `overrides`, "key.path=value"), expands its grid, applies includes,
/// excludes and overrides, and checks each cell as an Experiment. Throws ConfigError with
/// the file:line:column of the mistake; an exclude or override that selects no cell is a
/// mistake too, unless `overrides` narrowed sweep.grid or sweep.include (SweepPlan::skipped). Cells that come out identical are kept once.
SweepPlan plan_sweep(const std::string& file, const std::vector<std::string>& overrides = {});
/// The same from YAML text; `file` stands in for the file name in messages and the default output.
SweepPlan plan_sweep_text(const std::string& yaml, const std::string& file,
                          const std::vector<std::string>& overrides = {});

}  // namespace pipelab::tools
