/// partition.offload's refusals that need the plan's schedules (core/plan/offload_checks.h).
#include "core/plan/offload_checks.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/plan/run_plan.h"

namespace pipelab {
namespace {

/// One step's schedule (a pipeline that runs on: long enough to reach its steady state), of
/// the first whole-pipeline replica alone where the replicas run one schedule on devices of
/// their own: the first shows every position's actions (all 32 replicas of a 1,024-device
/// plan, lowered and offloaded for each check, were most of the planner's search time).
Schedule one_step(const RunPlan& whole) {
  const RunPlan plan = whole.separate_replicas() ? whole.first_replica() : whole;
  const int own = std::max(1, plan.scheme().micro_batches());
  const int units = plan.flushed() ? own : std::max(4 * std::max(plan.stages(), plan.devices()), own);
  return plan.program(std::vector<int>(static_cast<size_t>(plan.replicas()), units));
}

}  // namespace

void check_offload_own(const RunPlan& plan, const Offload& offload, const ConfigSource& source) {
  if (!offload.any()) return;
  const Schedule s = one_step(plan);
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (a.kind != ActionKind::Offload && a.kind != ActionKind::Reload) continue;
      source.fail("partition.offload",
                  fmt::format("scheme {}'s own schedule moves activations already (its {} of stage {}, micro-batch "
                              "{}), and partition.offload would add its OFFLOAD and RELOAD to them",
                              plan.scheme().type(), kind_info(a.kind).name, a.stage, a.mb),
                  "leave partition.offload out and keep the schedule's own, or take them out of the schedule");
    }
  }
}

void check_offload_places(const RunPlan& plan, const Offload& offload, const ConfigSource& source) {
  if (!offload.any()) return;
  const Schedule s = one_step(plan);
  std::vector<int> placed(static_cast<size_t>(plan.codec_positions()), 0);
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (a.kind != ActionKind::Offload) continue;
      const int p = plan.layout().replicated() ? plan.layout().position(a.stage) : a.stage % std::max(1, plan.stages());
      if (p >= 0 && static_cast<size_t>(p) < placed.size()) ++placed[static_cast<size_t>(p)];
    }
  }
  const std::string why = fmt::format(
      "under scheme {} none of its micro-batches waits more than partition.offload.prefetch ({}) compute actions of "
      "its device between its forward and its backward, so no OFFLOAD is placed",
      plan.scheme().type(), offload.prefetch);
  const std::string fix = "offload the stages whose micro-batches wait for their backward (the first ones of a "
                          "pipelined schedule: `pipelab schedule` shows them), lower prefetch, or leave "
                          "partition.offload out";
  const std::vector<int>& listed = offload.stages.stages;
  for (size_t i = 0; i < listed.size(); ++i) {
    if (plan.offloads(listed[i]) && placed[static_cast<size_t>(listed[i])] == 0) {
      source.fail(fmt::format("partition.offload.stages[{}]", i), fmt::format("stage {} offloads nothing: {}", listed[i], why),
                  fix);
    }
  }
  if (std::all_of(placed.begin(), placed.end(), [](int n) { return n == 0; })) {
    source.fail("partition.offload", fmt::format("no stage offloads anything: {}, or each stage recomputes its "
                                                 "forward (partition.recompute, the scheme's checkpoint)",
                                                 why),
                fix);
  }
}

}  // namespace pipelab
