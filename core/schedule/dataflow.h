#pragma once
/// The one dataflow walk over a complete schedule (one that carries its communication, see
/// lower.h), shared by the validator (deadlock check), the timeline simulation and the
/// sequential executor, so that all three agree on what "ready" means.
#include <functional>
#include <map>
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
/// its SEND ran; the k-th ALLREDUCE of a stage once every device holding a stage of its
/// collective group (its replicas, Schedule::collective_group) has arrived at round k (see
/// collective_arrivals); every other action at once (its inputs were received by earlier
/// actions of its device). Stops early (complete = false) when no device can proceed: the
/// schedule deadlocks.
WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit);

/// Where devices join collective rounds (round k of a group: the k-th ALLREDUCE of each of
/// its stages). A device joins once per round, at the first of its stages' k-th ALLREDUCE,
/// and brings all of its stages of the group: a device running two stages of one collective
/// (an interleaved pipeline under a global clip or tied weights) reaches them one at a time
/// and could not wait at the first for the second. Its later ALLREDUCE of the round only take
/// their results. Per action of `device`: true where it arrives (a stage runs on one device,
/// so this reads that device's actions only).
std::vector<bool> collective_arrivals(const Schedule& s, int device);

/// Per collective group, the devices that hold a stage of it (the arrivals a round needs).
std::map<int, int> collective_devices(const Schedule& s);

/// The member index of `stage` in its collective (its place among collective_stages()).
int collective_member(const Schedule& s, int stage);

/// Per device, the positions of its ALLREDUCE actions.
std::vector<std::vector<size_t>> all_reduce_positions(const Schedule& s);

}  // namespace pipelab
