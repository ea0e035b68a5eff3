#pragma once
/// The experiment a reading command (`describe`, `simulate`, `plan`) looks at: the file
/// itself, or, for a sweep file, its first cell (every cell shares the model unless the grid
/// varies it; `pipelab sweep FILE --dry-run` lists them), said in one line on stdout.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config/yaml_file.h"
#include "core/experiment/experiment.h"
#include "core/util/error.h"
#include "tools/sweep/plan.h"

namespace pipelab::cli {

/// `cell`: the sweep's run of that number (1-based, in `pipelab sweep FILE --dry-run`'s
/// order; `simulate --cell`), 0 for the first; a number past the sweep's runs, or one given
/// for a file that is not a sweep, is a UserError.
inline Experiment load_experiment_or_first_cell(const std::string& file, const std::vector<std::string>& sets,
                                                int cell = 0) {
  // The top-level key, wherever it stands in the file (the first line included).
  const YAML::Node root = load_yaml_file(file);
  if (!root.IsMap() || !root["sweep"]) {
    if (cell > 0) throw UserError(fmt::format("--cell {}: {} is not a sweep. Fix: drop --cell", cell, file));
    return Experiment::load(file, sets);
  }
  const std::vector<tools::PlannedRun> runs = tools::plan_sweep(file, sets).runs;
  if (cell > static_cast<int>(runs.size())) {
    throw UserError(fmt::format("--cell {}: the sweep {} has {} run{}. Fix: a number from 1 to {} (`pipelab sweep {} "
                                "--dry-run` lists them in order)",
                                cell, file, runs.size(), runs.size() == 1 ? "" : "s", runs.size(), file));
  }
  const tools::PlannedRun& run = runs[cell > 0 ? cell - 1 : 0];
  if (cell > 0) {
    fmt::print("{} is a sweep: its cell {} of {}, {}\n", file, cell, runs.size(), run.id);
  } else {
    fmt::print("{} is a sweep: its first cell, {} (`pipelab sweep {} --dry-run` lists the others; --cell N picks "
               "one)\n",
               file, run.id, file);
  }
  return Experiment::parse(run.experiment, file);
}

/// The configuration tree of the experiment load_experiment_or_first_cell reads: the file
/// with the --set values and its preset applied (`preset:` and `presets:` gone), or a sweep's
/// first cell. What `plan --emit` writes its winner into, so that the emitted file runs what
/// was planned; relative input paths are still the file's.
inline YAML::Node experiment_tree(const std::string& file, const std::vector<std::string>& sets) {
  YAML::Node root = load_yaml_file(file);
  if (root.IsMap() && root["sweep"]) return YAML::Load(tools::plan_sweep(file, sets).runs.front().experiment);
  ConfigSource source(file);
  apply_overrides(root, sets, source);
  return root;
}

}  // namespace pipelab::cli
