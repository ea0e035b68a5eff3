#pragma once
/// What slows a compute action down from what runs beside it, which only a replay knows.
///
/// Devices that share one host: the threads `--time-blocks` costs a plan for. Each block was
/// timed alone; two device threads busy together contend for the cores' caches, the memory
/// bandwidth and the allocator, and each runs slower by a factor measured the same way
/// (BlockTimes::busy_slowdown).
///
/// Messages beside compute: a message on its way to or from a device, or a copy between it and
/// its host, takes some of the device's cores and memory bandwidth (NCCL's kernels run on the
/// GPU's SMs; Gloo's and the shared-memory rings' copies on the host's cores), so the compute
/// it overlaps runs slower by LinkSpec::overlap_slowdown rather than hiding the message for
/// free ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
/// Learning", Lee et al. 2025: 18.9% on average, 40% at most, on A100, H100, MI250, MI210).
///
/// The replay is run again with each compute action stretched by the factors the replay before
/// gives it.
#include <vector>

#include "core/schedule/event_sim.h"
#include "core/schedule/schedule.h"

namespace pipelab::sim {

struct Contention {
  /// [k - 1]: how many times slower a device computes while k devices of its host compute
  /// (itself included; beyond the list, its last figure); empty: no shared host.
  std::vector<double> busy_slowdown;
  /// How many times slower a device computes while a message to or from it is in flight.
  double overlap_slowdown = 1;
};

/// Per device, per compute action in its row's order: the mean over the action's time in `t`
/// of `slowdown[k - 1]`, k the devices computing then (itself included; beyond the list, its
/// last figure).
std::vector<std::vector<double>> busy_factors(const EventTimeline& t, const std::vector<double>& slowdown);

/// Per device, per compute action in its row's order: 1 + (`slowdown` - 1) x the share of the
/// action's time in `t` during which a message from or to its device is on a link, or a copy
/// between it and its host is under way (several at once count once).
std::vector<std::vector<double>> overlap_factors(const EventTimeline& t, double slowdown);

/// `schedule` replayed with `costs`, then twice more with each compute action slowed by
/// the product of busy_factors and overlap_factors of the replay before (a fixed point
/// approached, not proved reached). Without a slowdown, or when no action of a replay is
/// slowed (nothing beside it), that replay; with one worker for every device (nothing computes
/// together), no busy factor.
EventTimeline replay_with_contention(const Schedule& schedule, const EventCosts& costs, const Contention& contention);

}  // namespace pipelab::sim
