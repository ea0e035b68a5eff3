#include "tools/simulate/contention.h"

#include <algorithm>
#include <memory>

#include "core/util/error.h"

namespace pipelab::sim {
namespace {

/// How many devices compute over each span between consecutive start and end times of `t`'s
/// compute actions: `times[i]` to `times[i + 1]` has `busy[i]`.
struct BusyProfile {
  std::vector<double> times;
  std::vector<int> busy;
};

BusyProfile busy_profile(const EventTimeline& t) {
  std::vector<std::pair<double, int>> edges;
  for (const auto& row : t.devices) {
    for (const TimedAction& x : row) {
      if (!is_compute(x.action.kind) || x.end <= x.start) continue;
      edges.push_back({x.start, +1});
      edges.push_back({x.end, -1});
    }
  }
  std::sort(edges.begin(), edges.end());
  BusyProfile p;
  int level = 0;
  for (size_t i = 0; i < edges.size();) {
    const double time = edges[i].first;
    for (; i < edges.size() && edges[i].first == time; ++i) level += edges[i].second;
    p.times.push_back(time);
    p.busy.push_back(level);
  }
  return p;
}

}  // namespace

std::vector<std::vector<double>> busy_factors(const EventTimeline& t, const std::vector<double>& slowdown) {
  PIPELAB_ASSERT(!slowdown.empty(), "a slowdown per number of busy devices");
  const BusyProfile p = busy_profile(t);
  const auto factor = [&](int k) {
    return std::max(1.0, slowdown[static_cast<size_t>(std::clamp<int>(k, 1, static_cast<int>(slowdown.size())) - 1)]);
  };
  std::vector<std::vector<double>> out(t.devices.size());
  for (size_t d = 0; d < t.devices.size(); ++d) {
    for (const TimedAction& x : t.devices[d]) {
      if (!is_compute(x.action.kind)) continue;
      if (x.end <= x.start) {
        out[d].push_back(1.0);
        continue;
      }
      // The spans within [start, end): the first one that starts at or before `start`.
      size_t i = static_cast<size_t>(std::upper_bound(p.times.begin(), p.times.end(), x.start) - p.times.begin());
      i = i > 0 ? i - 1 : 0;
      double weighted = 0;
      for (; i + 1 < p.times.size() && p.times[i] < x.end; ++i) {
        const double from = std::max(p.times[i], x.start), to = std::min(p.times[i + 1], x.end);
        if (to > from) weighted += (to - from) * factor(p.busy[i]);
      }
      out[d].push_back(weighted / (x.end - x.start));
    }
  }
  return out;
}

namespace {

/// Per device, the spans during which a message from or to it, or a copy between it and its
/// host, is under way: sorted and merged.
std::vector<std::vector<std::pair<double, double>>> traffic_spans(const EventTimeline& t) {
  std::vector<std::vector<std::pair<double, double>>> spans(t.devices.size());
  const auto add = [&spans](int device, double from, double to) {
    if (to > from && device >= 0 && static_cast<size_t>(device) < spans.size()) {
      spans[static_cast<size_t>(device)].push_back({from, to});
    }
  };
  for (const TimedTransfer& x : t.transfers) {
    add(x.from, x.start, x.end);
    if (x.to != x.from) add(x.to, x.start, x.end);
  }
  for (const TimedTransfer& x : t.copies) add(x.from, x.start, x.end);
  for (auto& row : spans) {
    std::sort(row.begin(), row.end());
    std::vector<std::pair<double, double>> merged;
    for (const auto& span : row) {
      if (!merged.empty() && span.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, span.second);
      } else {
        merged.push_back(span);
      }
    }
    row = std::move(merged);
  }
  return spans;
}

}  // namespace

std::vector<std::vector<double>> overlap_factors(const EventTimeline& t, double slowdown) {
  const auto spans = traffic_spans(t);
  std::vector<std::vector<double>> out(t.devices.size());
  for (size_t d = 0; d < t.devices.size(); ++d) {
    const auto& mine = spans[d];
    for (const TimedAction& x : t.devices[d]) {
      if (!is_compute(x.action.kind)) continue;
      double overlapped = 0;
      // The first span that ends after the action starts, then every one that starts before it ends.
      auto it = std::upper_bound(mine.begin(), mine.end(), x.start,
                                 [](double time, const std::pair<double, double>& s) { return time < s.second; });
      for (; it != mine.end() && it->first < x.end; ++it) {
        overlapped += std::min(it->second, x.end) - std::max(it->first, x.start);
      }
      const double share = x.end > x.start ? overlapped / (x.end - x.start) : 0.0;
      out[d].push_back(1 + (std::max(1.0, slowdown) - 1) * share);
    }
  }
  return out;
}

EventTimeline replay_with_contention(const Schedule& schedule, const EventCosts& costs, const Contention& contention) {
  EventTimeline t = replay(schedule, costs);
  const bool busy = !costs.one_worker && std::any_of(contention.busy_slowdown.begin(), contention.busy_slowdown.end(),
                                                      [](double f) { return f > 1; });
  const bool overlap = contention.overlap_slowdown > 1;
  if (!busy && !overlap) return t;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::vector<double>> f(t.devices.size());
    if (busy) f = busy_factors(t, contention.busy_slowdown);
    if (overlap) {
      const auto o = overlap_factors(t, contention.overlap_slowdown);
      for (size_t d = 0; d < f.size(); ++d) {
        if (f[d].empty()) f[d].assign(o[d].size(), 1.0);
        for (size_t i = 0; i < f[d].size(); ++i) f[d][i] *= o[d][i];
      }
    }
    // Nothing slowed (no device busy beside another, no message beside compute): this replay
    // is the fixed point.
    const bool slowed_any = std::any_of(f.begin(), f.end(), [](const std::vector<double>& row) {
      return std::any_of(row.begin(), row.end(), [](double x) { return x != 1.0; });
    });
    if (!slowed_any) break;
    auto factors = std::make_shared<const std::vector<std::vector<double>>>(std::move(f));
    // The replay walks each device's row in order, so its n-th compute action there is the
    // n-th it is asked to cost.
    auto seen = std::make_shared<std::vector<size_t>>(t.devices.size(), 0);
    EventCosts slowed = costs;
    slowed.compute = [base = costs.compute, factors, seen](int d, const Action& a) {
      const auto& mine = factors->at(static_cast<size_t>(d));
      size_t& n = seen->at(static_cast<size_t>(d));
      PIPELAB_ASSERT(n < mine.size(), "device {} asked to cost more compute actions than it runs", d);
      return base(d, a) * mine[n++];
    };
    t = replay(schedule, slowed);
  }
  return t;
}

}  // namespace pipelab::sim
