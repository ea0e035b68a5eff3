#pragma once
/// The one dataflow walk over a complete schedule (one that carries its communication, see
/// lower.h), shared by the validator (deadlock check), the timeline simulation and the
/// sequential executor, so that all three agree on what "ready" means.
#include <functional>
#include <tuple>
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// Where the walk stopped: per device, the index of the next action not run.
struct WalkResult {
  bool complete = false;
  std::vector<size_t> next;
};

/// The message a SEND or RECV action moves, as (receiving stage, payload, micro-batch): a
/// send and its receive have the same key.
std::tuple<int, char, int> message_key(const Action& a);

/// Runs `visit(device, index)` for every action in a dependency-respecting order: rounds
/// over the devices, each running at most one ready action per round. A RECV is ready once
/// its SEND ran; the k-th ALLREDUCE of a stage once every stage of its collective group (its
/// replicas, Schedule::collective_group) has reached its k-th ALLREDUCE; every other action
/// at once (its inputs were received by earlier actions of its device). Stops early (complete = false) when no device can
/// proceed: the schedule deadlocks.
WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit);

/// Per device, the positions of its ALLREDUCE actions.
std::vector<std::vector<size_t>> all_reduce_positions(const Schedule& s);

}  // namespace pipelab
