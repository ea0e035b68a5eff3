#pragma once
/// Devices that share one host: the threads `--time-blocks` costs a plan for. Each block was
/// timed alone; two device threads busy together contend for the cores' caches, the memory
/// bandwidth and the allocator, and each runs slower by a factor measured the same way
/// (BlockTimes::busy_slowdown). How long an action runs then depends on what the other
/// devices do meanwhile, which only a replay knows: the replay is run again with each compute
/// action stretched by the slowdown for the devices busy during it in the replay before.
#include <vector>

#include "core/schedule/event_sim.h"
#include "core/schedule/schedule.h"

namespace pipelab::sim {

/// Per device, per compute action in its row's order: the mean over the action's time in `t`
/// of `slowdown[k - 1]`, k the devices computing then (itself included; beyond the list, its
/// last figure).
std::vector<std::vector<double>> busy_factors(const EventTimeline& t, const std::vector<double>& slowdown);

/// `schedule` replayed with `costs`, then twice more with each compute action slowed by
/// busy_factors of the replay before (a fixed point approached, not proved reached). Without
/// a slowdown above 1, or with one worker for every device (nothing runs together), the plain
/// replay.
EventTimeline replay_sharing_host(const Schedule& schedule, const EventCosts& costs,
                                  const std::vector<double>& slowdown);

}  // namespace pipelab::sim
