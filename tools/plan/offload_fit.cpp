/// Offloading chosen stage by stage (tools/plan/offload_fit.h).
#include "tools/plan/offload_fit.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tools/plan/candidates.h"
#include "tools/plan/recompute_fit.h"

namespace pipelab::plan {
namespace {

/// `c` offloading `fraction` of the micro-batches of more and more stages until it fits;
/// false when it does not (or a stage cannot offload: the plan refuses it).
bool fit_with(Candidate& trial, double fraction, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
              const sim::SimOptions& options, int64_t& replays) {
  trial.offload.clear();
  trial.offload_fraction = fraction;
  for (;;) {
    std::vector<int> stages;
    try {
      const RunPlan plan = compile_plan(e, *trial.scheme, trial);
      stages = next_stages(trial, plan, space.memory_cap,
                           [&plan](int id) { return plan.recomputes(id) || plan.offloads(id); });
    } catch (const UserError&) {
      return false;  // the scheme or the stages refuse offload (partition.offload's refusals)
    }
    if (stages.empty()) return false;
    trial.offload.insert(trial.offload.end(), stages.begin(), stages.end());
    std::sort(trial.offload.begin(), trial.offload.end());
    trial.offload.erase(std::unique(trial.offload.begin(), trial.offload.end()), trial.offload.end());
    ++replays;
    if (!replay(trial, e, space, costs_of, options)) return false;
    if (trial.peak <= space.memory_cap) return true;
  }
}

}  // namespace

int64_t offload_to_fit(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                       const sim::SimOptions& options) {
  if (!space.offload || space.memory_cap <= 0 || !c.simulated || c.peak <= space.memory_cap) return 0;
  int64_t replays = 0;
  std::optional<Candidate> best;
  for (const double fraction : {0.5, 1.0}) {
    Candidate trial = c;
    if (!fit_with(trial, fraction, e, space, costs_of, options, replays)) continue;
    if (!best || trial.step < best->step) best = std::move(trial);
  }
  if (!best) return replays;
  best->label = fmt::format("{} offload=[{}]x{}", c.label, fmt::join(best->offload, ","), best->offload_fraction);
  c = std::move(*best);
  return replays;
}

}  // namespace pipelab::plan
