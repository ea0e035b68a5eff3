#pragma once
/// The planner's candidates (tools/plan/planner.h): what the search space holds, and each
/// candidate compiled, costed and replayed as a run would be.
#include <memory>
#include <vector>

#include "core/plan/run_plan.h"
#include "tools/plan/planner.h"

namespace pipelab::plan {

/// The scheme a section describes (a UserError when the registry refuses it).
std::unique_ptr<Scheme> make_scheme(const YAML::Node& section);
/// The run plan `pipelab run` would compile for candidate `c` of experiment `e`: its stages,
/// its replicas (partition.replicas, unless the scheme sets its own), the file's gradient
/// options, and its compression (compression_of).
RunPlan compile_plan(const Experiment& e, const Scheme& scheme, const Candidate& c);
/// The compression section a run of candidate `c` has: the planner's choice, else the file's.
const CompressionSection& compression_of(const Candidate& c, const Experiment& e);
/// Every candidate of the space, one per (scheme options, stages, replicas, micro-batches)
/// whose plan occupies the devices asked for, as many as the time limit lets it list; a
/// scheme type the registry does not know goes to `lost` with why.
std::vector<Candidate> enumerate(const Experiment& e, const PlanSpace& space, std::vector<Candidate>& lost);
/// Gives `c` its balance (FLOPs-balanced, or the measured one), its lower bound and its
/// static bytes; false (with c.lost) when its costs cannot be had.
bool analytic(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of);
/// Replays `c` with its balance in the event simulator; false (with c.lost) when refused.
bool replay(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
            const sim::SimOptions& options);
/// Updates of stage 0 between a micro-batch's forward and its first backward, at most: the
/// weight versions its gradient is stale by, read off the schedule whatever the scheme.
int staleness(const Schedule& s);

}  // namespace pipelab::plan
