#pragma once
/// Recomputation chosen stage by stage (tools/plan/planner.h). Recomputing a stage's
/// forwards trades a forward's time in every backward for all but the input of the
/// activations it holds, so it only pays where memory binds; and where it binds differs by
/// stage: 1F1B's first stage holds p micro-batches' activations and its last one, a V's
/// first device holds the first and the last chunk (AdaPipe, ASPLOS'24, plans recomputation
/// per stage for this reason). A candidate over the memory cap recomputes, on every device
/// over the cap at once, the earliest stage not yet recomputed there, until it fits.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/plan/run_plan.h"
#include "tools/plan/planner.h"

namespace pipelab::plan {

/// Per device over `cap`, the earliest pipeline stage it holds that is not `taken` yet (a
/// stage id: recomputes, offloads); empty when the fullest device has none left (acting
/// elsewhere cannot lower its peak). Each device's peak is mostly its own stages'
/// activations, so every device over the cap gains one in the same replay: a 64-stage plan
/// fits in a few replays, not in one per stage.
std::vector<int> next_stages(const Candidate& c, const RunPlan& plan, double cap, const std::function<bool(int)>& taken);

/// Makes `c` (replayed, over `space.memory_cap`, flushed per mini-batch so that the
/// recomputed forward reads the forward's weights and no number changes) fit by adding
/// recomputed stages; returns the replays made. `c` is changed only when it then fits.
int64_t recompute_to_fit(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                         const sim::SimOptions& options);

}  // namespace pipelab::plan
