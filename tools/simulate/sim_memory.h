#pragma once
/// The memory side of a replay (docs/simulate.md, "Memory"): per device over time, its static
/// bytes (weights in every version, gradients, optimizer state, buffers), then what its
/// actions hold: each micro-batch's kept activations from its forward to its backward (less
/// what an OFFLOAD moved to the host until its RELOAD), a split backward's gradients from I to
/// W, the gradients sent back until the receiver's backward ends, transients while an action
/// runs, an all-reduce's sums (in one process on the first member's device until the last
/// member has copied them; across processes each member's until its update), replayed inputs
/// until their last reader.
#include "core/plan/run_plan.h"
#include "tools/simulate/costs.h"
#include "tools/simulate/simulate.h"
#include "tools/simulate/unit_scale.h"

namespace pipelab::sim {

/// Fills `r`'s per-device static bytes, gradients, memory curves, peaks and host peaks from its
/// replayed timeline; `c`: every stage of the plan (its copies included).
void add_memory(SimResult& r, const RunPlan& plan, const SimCosts& c, const UnitScale& unit);

}  // namespace pipelab::sim
