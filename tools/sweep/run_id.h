#pragma once
/// Readable, stable run ids for the cells of a sweep, built from the values that vary
/// across the cells: `type=gpipe,stages=4,seed=1`. The same sweep file gives the same ids
/// on every run, which is how a rerun finds its finished and interrupted runs.
#include <string>
#include <utility>
#include <vector>

namespace pipelab::tools {

/// (key path, value text) of one assigned leaf, e.g. ("partition.stages", "4").
using Leaf = std::pair<std::string, std::string>;

/// One id per cell from each cell's leaves. A key path is part of the ids when its value
/// differs between cells (or some cells lack it); it is named by the shortest tail of its
/// path that no other varying path shares (`stages`, or `model.type` next to `scheme.type`).
/// Values are sanitised into folder names; equal ids get `~2`, `~3`, ... in cell order; a
/// single cell is `run`. `labels`, if given, receives each cell's varying (name, value) pairs.
std::vector<std::string> make_run_ids(const std::vector<std::vector<Leaf>>& cells,
                                      std::vector<std::vector<Leaf>>* labels = nullptr);

/// `text` with every character outside [A-Za-z0-9._+=,-] replaced by '_'.
std::string sanitize_for_path(const std::string& text);

}  // namespace pipelab::tools
