/// The baselines a plan is judged against (tools/plan/baselines.h).
#include "tools/plan/baselines.h"

#include <fmt/format.h>

#include "tools/plan/plan_report.h"

namespace pipelab::plan {
namespace {

bool is(const Candidate& c, const char* type) { return c.section && (*c.section)["type"].as<std::string>() == type; }

/// The fastest candidate of `type` on `devices` devices among `list` (ranked fastest first).
const Candidate* best_of(const std::vector<Candidate>& list, const char* type, int devices) {
  const Candidate* best = nullptr;
  for (const Candidate& c : list) {
    if (!is(c, type) || c.topology.devices != devices || c.stages == 0) continue;
    if (!best || (c.simulated && (!best->simulated || c.step < best->step))) best = &c;
  }
  return best;
}

/// Where `c` stands in the search's own table.
std::string standing(const Candidate& c, const PlanResult& result, const PlanSpace& space, const char* unsearched) {
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    if (result.ranked[i].label == c.label && result.ranked[i].topology.devices == c.topology.devices) {
      return static_cast<int>(i) < space.top ? fmt::format("#{}", i + 1) : fmt::format("#{}, below the table", i + 1);
    }
  }
  return unsearched;
}

std::optional<Baseline> find(const PlanResult& found, const char* type, int devices, const PlanResult& result,
                             const PlanSpace& space, const char* unsearched) {
  const Candidate* ranked = best_of(found.ranked, type, devices);
  if (ranked) return Baseline{*ranked, standing(*ranked, result, space, unsearched), true};
  const Candidate* lost = best_of(found.lost, type, devices);
  if (!lost) return std::nullopt;
  return Baseline{*lost, "not ranked: " + lost->lost, false};
}

std::string verdict(const Candidate& best, const Baselines& b, int devices) {
  const double margin = 1 - kPipelineMargin;
  const bool best_is_dp = is(best, "dp") || best.stages == 1;
  if (b.single && b.single->fits && b.single->candidate.simulated && best.step >= margin * b.single->candidate.step) {
    return fmt::format(
        "don't pipeline: one device takes {} a step and the best plan on {} devices {}: latency-bound (each "
        "action's kernel launches and messages cost more than splitting the work saves)",
        seconds_text(b.single->candidate.step), devices, seconds_text(best.step));
  }
  if (!best_is_dp && b.dp && b.dp->fits && b.dp->candidate.simulated && best.step >= margin * b.dp->candidate.step) {
    return fmt::format("don't pipeline: data parallelism on {} devices ({}) is within {:.0f}% of the best plan ({}) "
                       "and simpler: the model fits each device and its all-reduce costs no more than a pipeline's "
                       "bubble and messages",
                       devices, seconds_text(b.dp->candidate.step), 100 * kPipelineMargin, seconds_text(best.step));
  }
  if (best_is_dp) return "don't pipeline: the best plan is data parallelism (one stage per device)";
  std::string why = "pipeline: ";
  if (b.dp && b.dp->fits && b.dp->candidate.simulated) {
    why += fmt::format("{:.2f}x faster than data parallelism on {} devices", b.dp->candidate.step / best.step, devices);
  } else if (b.dp) {
    why += fmt::format("data parallelism does not fit ({})", b.dp->standing);
  } else {
    why += "data parallelism was not planned";
  }
  if (b.single && b.single->fits && b.single->candidate.simulated) {
    why += fmt::format(", {:.2f}x faster than one device", b.single->candidate.step / best.step);
  }
  return why;
}

}  // namespace

Baselines judge_baselines(const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                          const PlanResult& result) {
  Baselines out;
  if (!space.repartition || result.ranked.empty()) return out;  // measured costs fix the stages
  PlanSpace base = space;
  base.schemes = {"single", "dp"};
  base.allow_idle = true;  // one device leaves the others idle
  base.max_staleness = 0;
  base.compress = nullptr;
  base.top = 1 << 20;
  const PlanResult found = search(e, base, costs_of, sim::SimOptions{});
  out.single = find(found, "single", 1, result, space,
                    space.allow_idle ? "not ranked" : "not searched without --allow-idle (it leaves N - 1 idle)");
  out.dp = find(found, "dp", space.devices, result, space, "not in the search");
  out.verdict = verdict(result.ranked.front(), out, space.devices);
  return out;
}

}  // namespace pipelab::plan
