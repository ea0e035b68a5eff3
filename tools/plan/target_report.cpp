/// What `pipelab plan --target` shows (tools/plan/target_report.h).
#include "tools/plan/target_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace pipelab::plan {
namespace {

std::string what(const TargetReached& r) {
  return fmt::format("{} {} {:g}", r.metric, r.at_least ? ">=" : "<=", r.target);
}

std::string steps_text(const TargetReached& r) {
  if (!r.reached) return "not reached";
  return fmt::format("{:.1f}{}", r.train_seconds, r.interpolated ? "" : " (at most)");
}

}  // namespace

std::vector<size_t> target_order(const std::vector<Candidate>& ranked, const std::vector<double>& times) {
  std::vector<size_t> order;
  for (size_t i = 0; i < ranked.size() && i < times.size(); ++i) {
    if (!std::isnan(times[i])) order.push_back(i);
  }
  // Stable: equal times (synchronous plans that need no step more) keep the throughput order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return times[a] < times[b]; });
  return order;
}

std::string proxy_lines(const TimeToTarget& t, int64_t budget) {
  std::string out;
  for (const ProxyRun& r : t.runs) {
    std::string result;
    if (!r.refused.empty()) {
      result = "refused: " + r.refused;
    } else if (r.reached.reached) {
      result = fmt::format("{} in {}{:.1f} steps (epoch {})", what(r.reached), r.reached.interpolated ? "" : "at most ",
                           r.reached.train_seconds, r.reached.epoch);
    } else {
      result = fmt::format("{} not reached in {} steps ({} at the last evaluation{})", what(r.reached), r.steps_run,
                           std::isfinite(r.last_value) ? fmt::format("{:.4g}", r.last_value) : "none",
                           r.status == "diverged" ? "; the run diverged" : "");
    }
    out += fmt::format("  {}: {}{}\n", r.family, result, r.cached ? " [cached]" : "");
  }
  const std::string kept = t.runs.empty() ? "the cache" : std::filesystem::path(t.runs.front().dir).parent_path().string();
  out += fmt::format("  (each: the plan's numerics on this CPU, its model narrowed as cpu-mini narrows it, at most {} "
                     "steps; runs kept in {})\n",
                     budget, kept);
  return out;
}

std::string target_table(const std::vector<Candidate>& ranked, const TimeToTarget& t, const std::vector<double>& times,
                         const std::vector<size_t>& order, int top) {
  std::string out =
      fmt::format("| # | scheme | {} | stale | step | steps to target | time to target | throughput rank |\n"
                  "|---|---|---|---|---|---|---|---|\n",
                  kTopologyColumn);
  for (size_t rank = 0; rank < order.size() && static_cast<int>(rank) < top; ++rank) {
    const size_t i = order[rank];
    const Candidate& c = ranked[i];
    const TargetReached& r = t.runs[t.family_of[i]].reached;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | #{} |\n", rank + 1, c.label, c.topology.cell(),
                       c.staleness, seconds_text(c.step), steps_text(r),
                       std::isfinite(times[i]) ? seconds_text(times[i]) : "not reached", i + 1);
  }
  return out;
}

std::string target_heading(const TimeToTarget& t) {
  return t.runs.empty() ? "the target" : what(t.runs.front().reached);
}

std::string target_why(const std::vector<Candidate>& ranked, const TimeToTarget& t, const std::vector<double>& times,
                       const std::vector<size_t>& order) {
  if (order.empty() || !std::isfinite(times[order.front()])) {
    return "no plan reached the target within the proxy budget: ranked by throughput alone. Fix: a larger "
           "--proxy-steps, or a target the run reaches";
  }
  const size_t best = order.front();
  const Candidate& b = ranked[best];
  const TargetReached& rb = t.runs[t.family_of[best]].reached;
  std::string out = fmt::format("best by time to {}: {} on {}: {} steps x {} = {}", what(rb), b.label,
                                b.topology.text(), steps_text(rb), seconds_text(b.step), seconds_text(times[best]));
  if (best == 0) return out + "; it is also the fastest step (throughput #1)";
  const Candidate& f = ranked.front();
  const TargetReached& rf = t.runs[t.family_of[0]].reached;
  const double faster = (b.step - f.step) / b.step;
  out += fmt::format("\nthroughput #1, {} on {}, ", f.label, f.topology.text());
  out += faster < 5e-4 ? fmt::format("takes as long a step ({})", seconds_text(f.step))
                       : fmt::format("steps {:.1f}% faster ({} against {}; bubble {:.1f}% against {:.1f}%)",
                                     100 * faster, seconds_text(f.step), seconds_text(b.step), 100 * f.bubble,
                                     100 * b.bubble);
  if (!t.runs[t.family_of[0]].refused.empty()) return out + " but its proxy could not run (above)";
  if (!rf.reached) {
    return out + " but does not reach the target in the proxy's steps" +
           (f.staleness > 0 ? fmt::format(" (its gradients are stale by {} version{})", f.staleness,
                                          f.staleness == 1 ? "" : "s")
                            : "");
  }
  return out + fmt::format(" but needs {} steps to {}'s {}{}: {} to the target", steps_text(rf), b.label,
                           steps_text(rb),
                           f.staleness > b.staleness
                               ? fmt::format(" (its gradients are stale by {} version{})", f.staleness,
                                             f.staleness == 1 ? "" : "s")
                               : "",
                           seconds_text(times[0]));
}

}  // namespace pipelab::plan
