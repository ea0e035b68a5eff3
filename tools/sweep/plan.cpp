#include "tools/sweep/plan.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/experiment/experiment.h"
#include "core/experiment/input_paths.h"
#include "core/util/names.h"
#include "tools/sweep/grid.h"
#include "tools/sweep/key_paths.h"

namespace pipelab::tools {
namespace {

/// A cell while it is being built: its own fresh copy of the file, so edits stay local and
/// every line:column survives.
struct Cell {
  SweepDocument doc;
  YAML::Node tree;  ///< the cell's experiment: the file without `sweep:`, plus its assignments
  std::vector<Leaf> leaves;
};

/// Sets `kv` in the cell. Later errors about that key (or inside it) name the place in the
/// sweep section that set it, through the same mechanism that names a --set override.
void assign(Cell& cell, const KeyValue& kv) {
  set_path(cell.tree, kv.key, kv.value.yaml());
  cell.doc.source->add_override(kv.key, kv.value.where());
}

/// Whether `key` is `path` or inside it.
bool within(const std::string& key, const std::string& path) {
  return key == path || key.rfind(path + ".", 0) == 0;
}

/// The preset's settings (core/config/presets.h) once more, over the cell's own: a miniature's
/// epochs and devices hold in every cell. Its `sweep.` settings shaped the grid already. A
/// grid or include value it replaces leaves the cell's id: a miniature's cell run on the CPU
/// is not named devices=cuda_0-cuda_1.
void apply_preset_last(Cell& cell) {
  for (const ConfigSource::PresetSetting& s : cell.doc.source->preset_settings()) {
    if (within(s.path, "sweep")) continue;
    set_path(cell.tree, s.path, YAML::Clone(s.value));
    cell.doc.source->add_override(s.path, s.where);
    cell.leaves.erase(std::remove_if(cell.leaves.begin(), cell.leaves.end(),
                                     [&](const Leaf& leaf) { return within(leaf.first, s.path); }),
                      cell.leaves.end());
  }
}

bool matches(const YAML::Node& tree, const KeyValues& entry) {
  return std::all_of(entry.items.begin(), entry.items.end(),
                     [&](const KeyValue& kv) { return same_value(find_path(tree, kv.key), kv.value.yaml()); });
}

/// Fails at entry `i` of the list `key` of the sweep section when it selected no cell, unless
/// the command line narrowed the grid (a sweep shrunk to run in miniature): then the entry is
/// skipped and said so in `skipped`.
void require_hits(const SweepDocument& doc, const char* key, const std::vector<int>& hits,
                  std::vector<std::string>& skipped) {
  std::string narrowed = doc.source->override_within("sweep.grid");
  if (narrowed.empty()) narrowed = doc.source->override_within("sweep.include");
  for (size_t i = 0; i < hits.size(); ++i) {
    if (hits[i] > 0) continue;
    const ConfigNode list = doc.section().child(key);
    const ConfigNode entry(list.yaml()[i], list.source(), fmt::format("{}[{}]", list.path(), i));
    if (!narrowed.empty()) {
      skipped.push_back(fmt::format("{} ({}) selects no cell of the grid as narrowed by {}: skipped", entry.path(),
                                    entry.where(), narrowed));
      continue;
    }
    entry.fail("selects no cell of the sweep",
               "compare its keys and values with the grid and include entries (values are compared as "
               "numbers where both are numbers), or remove it");
  }
}

SweepPlan plan(const SweepDocument& doc) {
  const SweepOptions sweep = read_sweep_options(doc);
  std::vector<int> excluded_by(sweep.exclude.size()), overridden_by(sweep.overrides.size());
  std::vector<Cell> cells;
  for (const CellPick& pick : expand_grid(sweep)) {
    Cell cell{doc.reload(), {}, {}};
    cell.tree = cell.doc.root;
    cell.tree.remove("sweep");
    for (const KeyValue& kv : cell_assignments(sweep, pick)) {
      assign(cell, kv);
      flatten_leaves(kv.key, kv.value.yaml(), cell.leaves);
    }
    // Excludes and matches see the cell before any override, so overrides never cascade.
    bool excluded = false;
    for (size_t i = 0; i < sweep.exclude.size(); ++i) {
      if (matches(cell.tree, sweep.exclude[i])) {
        ++excluded_by[i];
        excluded = true;
      }
    }
    if (excluded) continue;
    std::vector<size_t> apply;
    for (size_t i = 0; i < sweep.overrides.size(); ++i) {
      if (matches(cell.tree, sweep.overrides[i].match)) apply.push_back(i);
    }
    for (const size_t i : apply) {
      ++overridden_by[i];
      for (const KeyValue& kv : sweep.overrides[i].set.items) assign(cell, kv);
    }
    apply_preset_last(cell);
    cells.push_back(std::move(cell));
  }
  std::vector<std::string> skipped;
  require_hits(doc, "exclude", excluded_by, skipped);
  require_hits(doc, "overrides", overridden_by, skipped);
  if (cells.empty()) doc.section().child("exclude").fail("excludes every cell", "remove entries from sweep.exclude");

  // Every cell must be a valid experiment before anything runs; identical cells run once.
  std::vector<Cell> unique;
  std::set<std::string> seen;
  for (Cell& cell : cells) {
    // A cell's copy is written elsewhere: what it reads must already name its place (the
    // sweep file's folder, or the current directory for --set values).
    resolve_input_paths(cell.tree, *cell.doc.source);
    std::vector<std::string> values;
    for (const Leaf& l : cell.leaves) values.push_back(l.first + "=" + l.second);
    const std::string which = values.empty() ? "without grid values" : join(values, ", ");
    try {
      Experiment::from_tree(cell.tree, cell.doc.source, doc.name);
    } catch (const ConfigError& e) {
      // The place may be in the base experiment, wrong only with this cell's values.
      throw ConfigError(fmt::format("{} (In the sweep cell {}.)", e.what(), which));
    }
    const std::vector<std::string> missing = missing_input_paths(cell.tree);
    if (!missing.empty()) {
      throw ConfigError(fmt::format("{}: the sweep cell {} names files that do not exist ({}); nothing was run or "
                                    "written. Fix: correct the paths (relative ones are read from the sweep file's "
                                    "folder, --set ones from the current directory)",
                                    doc.source->file(), which, join(missing, "; ")));
    }
    if (seen.insert(emit_yaml(cell.tree)).second) unique.push_back(std::move(cell));
  }
  std::vector<std::vector<Leaf>> leaves, labels;
  for (const Cell& c : unique) leaves.push_back(c.leaves);
  const std::vector<std::string> ids = make_run_ids(leaves, &labels);

  SweepPlan out;
  out.skipped = skipped;
  out.file = doc.source->file();
  out.name = doc.name;
  out.output = sweep.output.empty() ? "runs/" + doc.name : sweep.output;
  for (size_t i = 0; i < unique.size(); ++i) {
    PlannedRun run;
    run.id = ids[i];
    run.dir = (std::filesystem::path(out.output) / run.id).string();
    run.labels = labels[i];
    set_path(unique[i].tree, "run.output", YAML::Node(run.dir));
    // The header names neither the file nor the id: renaming the sweep file must not make
    // its finished runs look changed (run_status.h).
    run.experiment = "# One run of a sweep, written by `pipelab sweep`: edit the sweep file, not this copy.\n" +
                     emit_yaml(unique[i].tree);
    out.runs.push_back(std::move(run));
  }
  return out;
}

}  // namespace

SweepPlan plan_sweep(const std::string& file, const std::vector<std::string>& overrides) {
  return plan(SweepDocument::load(file, overrides));
}

SweepPlan plan_sweep_text(const std::string& yaml, const std::string& file, const std::vector<std::string>& overrides) {
  return plan(SweepDocument::parse(yaml, file, overrides));
}

}  // namespace pipelab::tools
