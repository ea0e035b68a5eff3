#pragma once
/// The experiment a reading command (`describe`, `simulate`, `plan`) looks at: the file
/// itself, or, for a sweep file, its first cell (every cell shares the model unless the grid
/// varies it; `pipelab sweep FILE --dry-run` lists them), said in one line on stdout.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config/yaml_file.h"
#include "core/train/experiment.h"
#include "tools/sweep/plan.h"

namespace pipelab::cli {

inline Experiment load_experiment_or_first_cell(const std::string& file, const std::vector<std::string>& sets) {
  // The top-level key, wherever it stands in the file (the first line included).
  const YAML::Node root = load_yaml_file(file);
  if (!root.IsMap() || !root["sweep"]) return Experiment::load(file, sets);
  const tools::PlannedRun cell = tools::plan_sweep(file, sets).runs.front();
  fmt::print("{} is a sweep: its first cell, {} (`pipelab sweep {} --dry-run` lists the others)\n", file, cell.id,
             file);
  return Experiment::parse(cell.experiment, file);
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
