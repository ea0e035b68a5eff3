#include "tools/sweep/grid.h"

#include "tools/sweep/key_paths.h"

namespace pipelab::tools {
namespace {

/// Appends every combination of the axes whose entry in `fixed` is false to `out`, the
/// first axis slowest; fixed axes get -1.
void product(const SweepOptions& sweep, const std::vector<bool>& fixed, int include, std::vector<CellPick>& out) {
  CellPick pick{include, std::vector<int>(sweep.grid.items.size(), -1)};
  for (size_t a = 0; a < fixed.size(); ++a) {
    if (!fixed[a]) pick.values[a] = 0;
  }
  for (;;) {
    out.push_back(pick);
    // Odometer increment from the last axis.
    size_t a = fixed.size();
    for (; a-- > 0;) {
      if (fixed[a]) continue;
      if (++pick.values[a] < static_cast<int>(sweep.grid.items[a].value.yaml().size())) break;
      pick.values[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

std::vector<CellPick> expand_grid(const SweepOptions& sweep) {
  std::vector<CellPick> out;
  const size_t axes = sweep.grid.items.size();
  if (axes > 0) product(sweep, std::vector<bool>(axes, false), -1, out);
  for (size_t i = 0; i < sweep.include.size(); ++i) {
    std::vector<bool> named(axes, false);
    for (size_t a = 0; a < axes; ++a) {
      for (const KeyValue& kv : sweep.include[i].items)
        named[a] = named[a] || paths_overlap(kv.key, sweep.grid.items[a].key);
    }
    product(sweep, named, static_cast<int>(i), out);
  }
  return out;
}

std::vector<KeyValue> cell_assignments(const SweepOptions& sweep, const CellPick& pick) {
  std::vector<KeyValue> out;
  for (size_t a = 0; a < pick.values.size(); ++a) {
    if (pick.values[a] < 0) continue;
    const KeyValue& axis = sweep.grid.items[a];
    const size_t i = static_cast<size_t>(pick.values[a]);
    out.push_back(
        {axis.key, ConfigNode(axis.value.yaml()[i], axis.value.source(), fmt::format("{}[{}]", axis.value.path(), i))});
  }
  if (pick.include >= 0) {
    const KeyValues& entry = sweep.include[static_cast<size_t>(pick.include)];
    out.insert(out.end(), entry.items.begin(), entry.items.end());
  }
  return out;
}

}  // namespace pipelab::tools
