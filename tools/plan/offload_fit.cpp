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

/// Per pipeline stage of `c`, whether offloading it would move anything: not a stage whose
/// saved tensors are all its input and output (one Linear-ReLU block), which stay on the
/// device whatever the schedule says (core/stage/saved_tensors.h), nor one none of whose
/// micro-batches waits for its backward (1F1B's last stage), where the pass places no OFFLOAD.
std::vector<bool> movable_stages(const Candidate& c, const RunPlan& plan, const Experiment& e, const PlanSpace& space,
                                 double fraction, const CostsOf& costs_of) {
  const StepShape step = plan.step(space.batch, c.flushed ? c.micro_batches : 0);
  const sim::SimCosts costs = costs_of(c.balance, step.examples_per_micro_batch, compression_of(c, e));
  // Whole-pipeline replicas on devices of their own run one schedule: the first alone
  // answers for every position.
  const RunPlan one = plan.separate_replicas() ? plan.first_replica() : plan;
  const Schedule s = one.program(std::vector<int>(static_cast<size_t>(one.replicas()), step.replay_micro_batches));
  OffloadPolicy every;
  every.stages.assign(static_cast<size_t>(s.stages()), true);
  every.fraction = fraction;
  const std::vector<bool> offloading = offloading_stages(s, every);
  std::vector<bool> out(costs.stages.size(), false);
  for (int id = 0; id < s.stages(); ++id) {
    const int p = one.layout().replicated() ? one.layout().position(id) : id % std::max(1, one.stages());
    if (p < 0 || static_cast<size_t>(p) >= out.size()) continue;
    if (costs.stages[static_cast<size_t>(p)].offloaded_bytes() > 0 && offloading[static_cast<size_t>(id)]) {
      out[static_cast<size_t>(p)] = true;
    }
  }
  return out;
}

/// `c` offloading `fraction` of the micro-batches of more and more stages until it fits;
/// false when it does not (or a stage cannot offload: the plan refuses it).
bool fit_with(Candidate& trial, double fraction, const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
              const sim::SimOptions& options, int64_t& replays) {
  trial.offload.clear();
  trial.offload_fraction = fraction;
  std::vector<bool> movable;
  for (;;) {
    std::vector<int> stages;
    try {
      const RunPlan plan = compile_plan(e, *trial.scheme, trial);
      if (movable.empty()) movable = movable_stages(trial, plan, e, space, fraction, costs_of);
      const auto moves = [&](int id) {
        const int p = plan.layout().replicated() ? plan.layout().position(id) : id % std::max(1, plan.stages());
        return p >= 0 && static_cast<size_t>(p) < movable.size() && movable[static_cast<size_t>(p)];
      };
      stages = next_stages(trial, plan, space.memory_cap,
                           [&](int id) { return plan.recomputes(id) || plan.offloads(id) || !moves(id); });
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
