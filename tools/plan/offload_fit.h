#pragma once
/// Offloading chosen stage by stage, beside recomputation (tools/plan/recompute_fit.h): the
/// planner's second memory lever. Offloading a stage's longest-lived micro-batches to host
/// memory (partition.offload; PipeOffload, Wan et al. 2025) frees what they hold between
/// their forward and backward for a copy each way over the device's host link, hidden
/// behind compute when the link is fast enough; recomputing frees it for a forward's time in
/// every backward. Which one wins depends on that link against the compute, so both are
/// replayed and the faster that fits is kept.
#include <cstdint>

#include "tools/plan/planner.h"

namespace pipelab::plan {

/// Makes `c` (replayed, over `space.memory_cap`) fit by offloading stages, with half of each
/// stage's micro-batches (PipeOffload's selective default) and then all of them (the
/// devices over the cap add their earliest stage that neither offloads nor recomputes, until
/// it fits); returns the replays made. `c` is changed
/// only when a fraction fits, to the fastest that does. Needs a host link in the costs
/// (`host_gbps`): without one a copy would be free.
int64_t offload_to_fit(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                       const sim::SimOptions& options);

}  // namespace pipelab::plan
