#pragma once
/// The one dataflow walk over a schedule, shared by the validator (deadlock check), the
/// timeline simulation and the sequential executor, so that all three agree on what
/// "ready" means.
#include <functional>
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// Where the walk stopped: per stage, the index of the next action not run.
struct WalkResult {
  bool complete = false;
  std::vector<size_t> next;
};

/// Runs `visit(stage, index)` for every action in a dependency-respecting order: rounds
/// over the stages, each stage running at most one ready action per round. An action is
/// ready when its dependencies (Schedule::dependencies) are done and, for the k-th update
/// under synchronized updates, when every stage has reached its k-th update (a barrier).
/// Stops early (complete = false) when no stage can proceed: the schedule deadlocks.
WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit);

/// Per stage, the positions of its updates (for the synchronized-update barrier).
std::vector<std::vector<size_t>> update_positions(const Schedule& s);

}  // namespace pipelab
