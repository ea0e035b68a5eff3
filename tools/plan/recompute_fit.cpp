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

}  // namespace

std::vector<int> next_stages(const Candidate& c, const RunPlan& plan, double cap, const std::function<bool(int)>& taken) {
  const auto fullest = std::max_element(c.peaks.begin(), c.peaks.end()) - c.peaks.begin();
  const std::vector<int>& placement = plan.placement();
  std::vector<int> earliest(c.peaks.size(), -1);
  for (size_t id = 0; id < placement.size(); ++id) {
    const auto device = static_cast<size_t>(placement[id]);
    if (c.peaks[device] <= cap || taken(static_cast<int>(id))) continue;
    const int p = plan.layout().replicated() ? plan.layout().position(static_cast<int>(id)) : static_cast<int>(id);
    if (earliest[device] < 0 || p < earliest[device]) earliest[device] = p;
  }
  if (earliest[static_cast<size_t>(fullest)] < 0) return {};
  std::vector<int> out;
  for (const int p : earliest) {
    if (p >= 0) out.push_back(p);
  }
  return out;
}

int64_t recompute_to_fit(Candidate& c, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                         const sim::SimOptions& options) {
  if (space.memory_cap <= 0 || !c.simulated || !c.flushed || c.peak <= space.memory_cap) return 0;
  int64_t replays = 0;
  Candidate trial = c;
  for (;;) {
    const RunPlan plan = compile_plan(e, *trial.scheme, trial);
    const std::vector<int> stages =
        next_stages(trial, plan, space.memory_cap, [&plan](int id) { return plan.recomputes(id); });
    if (stages.empty()) return replays;
    trial.recompute = recomputed(plan);
    trial.recompute.insert(trial.recompute.end(), stages.begin(), stages.end());
    std::sort(trial.recompute.begin(), trial.recompute.end());
    trial.recompute.erase(std::unique(trial.recompute.begin(), trial.recompute.end()), trial.recompute.end());
    ++replays;
    if (!replay(trial, e, space, costs_of, options)) return replays;
    if (trial.peak <= space.memory_cap) break;
  }
  trial.label = fmt::format("{} recompute=[{}]", c.label, fmt::join(trial.recompute, ","));
  c = std::move(trial);
  return replays;
}

}  // namespace pipelab::plan
