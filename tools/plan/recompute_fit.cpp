/// Recomputation chosen stage by stage (tools/plan/recompute_fit.h).
#include "tools/plan/recompute_fit.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tools/plan/candidates.h"

namespace pipelab::plan {
namespace {

/// The pipeline stages `plan` recomputes (the file's choice and the planner's).
std::vector<int> recomputed(const RunPlan& plan) {
  std::vector<int> out;
  for (int p = 0; p < plan.codec_positions(); ++p) {
    if (plan.recomputes(plan.layout().replicated() ? plan.layout().stage(p, 0) : p)) out.push_back(p);
  }
  return out;
}

/// The earliest pipeline stage on the fullest device of `c` that does not recompute yet;
/// -1 when that device recomputes all of them (recomputing elsewhere cannot lower its peak).
int next_stage(const Candidate& c, const RunPlan& plan) {
  const auto fullest = std::max_element(c.peaks.begin(), c.peaks.end()) - c.peaks.begin();
  const std::vector<int>& placement = plan.placement();
  int best = -1;
  for (size_t id = 0; id < placement.size(); ++id) {
    if (placement[id] != fullest || plan.recomputes(static_cast<int>(id))) continue;
    const int p = plan.layout().replicated() ? plan.layout().position(static_cast<int>(id)) : static_cast<int>(id);
    if (best < 0 || p < best) best = p;
  }
  return best;
}

}  // namespace

int64_t recompute_to_fit(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                         const sim::SimOptions& options) {
  if (space.memory_cap <= 0 || !c.simulated || !c.flushed || c.peak <= space.memory_cap) return 0;
  int64_t replays = 0;
  Candidate trial = c;
  for (;;) {
    const RunPlan plan = compile_plan(e, *trial.scheme, trial);
    const int stage = next_stage(trial, plan);
    if (stage < 0) return replays;
    trial.recompute = recomputed(plan);
    trial.recompute.insert(std::upper_bound(trial.recompute.begin(), trial.recompute.end(), stage), stage);
    ++replays;
    if (!replay(trial, e, space, costs_of, options)) return replays;
    if (trial.peak <= space.memory_cap) break;
  }
  trial.label = fmt::format("{} recompute=[{}]", c.label, fmt::join(trial.recompute, ","));
  c = std::move(trial);
  return replays;
}

}  // namespace pipelab::plan
