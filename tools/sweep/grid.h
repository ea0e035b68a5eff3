#pragma once
/// Grid expansion: which value each key takes in each cell of a sweep, before any cell
/// becomes an experiment (exclusions and overrides need the cell's whole experiment and
/// are applied by the planner, tools/sweep/plan.h).
#include <vector>

#include "tools/sweep/sweep_spec.h"

namespace pipelab::tools {

/// One cell: the value index taken on each grid axis, and the include entry it comes from.
struct CellPick {
  int include = -1;         ///< index into SweepOptions::include, or -1 for a plain grid cell
  std::vector<int> values;  ///< per grid axis: index of its value, or -1 when the include entry names the axis
};

/// Every combination of the grid in file order (the first axis varies slowest, like nested
/// loops), then each include entry combined with every value of the grid axes it does not
/// name, so `include: [{scheme.type: single, partition.stages: 1}]` in a grid over seeds
/// adds the single-device baseline once per seed. Without a grid, one cell per include entry.
std::vector<CellPick> expand_grid(const SweepOptions& sweep);

/// The assignments of a cell: its grid values (axis order), then its include entry's keys.
std::vector<KeyValue> cell_assignments(const SweepOptions& sweep, const CellPick& pick);

}  // namespace pipelab::tools
