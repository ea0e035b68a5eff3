#include "core/schedule/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/schedule/lower.h"
#include "core/util/error.h"

namespace pipelab {

CostModel CostModel::uniform(int stages, double forward, double backward, double update, double head) {
  CostModel c;
  const size_t n = static_cast<size_t>(stages);
  c.seconds[ActionKind::Forward].assign(n, forward);
  c.seconds[ActionKind::Head].assign(n, head);
  c.seconds[ActionKind::Backward].assign(n, backward);
  c.seconds[ActionKind::Update].assign(n, update);
  return c;
}

CostModel CostModel::split(int stages, double forward, double input, double weight) {
  CostModel c = uniform(stages, forward, input + weight, 0, 0.5 * (input + weight));
  c.seconds[ActionKind::BackwardInput].assign(static_cast<size_t>(stages), input);
  c.seconds[ActionKind::BackwardWeight].assign(static_cast<size_t>(stages), weight);
  return c;
}

double CostModel::cost(const Action& a) const {
  const ActionKindInfo& k = kind_info(a.kind);
  if (k.role != KindRole::Compute) return 0;
  const size_t r = static_cast<size_t>(a.stage);
  if (!seconds[a.kind].empty()) return seconds[a.kind].at(r);
  const std::vector<double>& fallback = seconds[k.cost_fallback];
  return k.cost_fallback == a.kind || fallback.empty() ? 0.0 : k.cost_share * fallback.at(r);
}

Timeline simulate_timeline(const Schedule& in, const CostModel& costs) {
  const Schedule s = with_communication(in);
  const size_t stages = static_cast<size_t>(s.stages());
  const size_t given = costs.seconds[ActionKind::Forward].size();
  PIPELAB_ASSERT(given == stages && costs.seconds[ActionKind::Backward].size() == stages,
                 "cost model has {} stages, schedule {}", given, stages);
  EventCosts events;
  events.compute = [&](int, const Action& a) { return costs.cost(a); };
  events.latency = [&](const Action&) { return costs.transfer; };
  events.collective = [&](const Action&) { return costs.transfer; };
  const EventTimeline replayed = replay(s, events);
  const size_t devices = static_cast<size_t>(s.devices());
  Timeline t;
  t.devices.resize(devices);
  t.busy.assign(devices, 0);
  t.peak_in_flight.assign(devices, 0);
  for (size_t d = 0; d < devices; ++d) {
    int in_flight = 0;
    for (const TimedAction& x : replayed.devices[d]) {
      const Action& a = x.action;
      if (!is_compute(a.kind)) continue;
      t.busy[d] += x.end - x.start;
      t.devices[d].push_back(x);
      if (a.kind == ActionKind::Forward) t.peak_in_flight[d] = std::max(t.peak_in_flight[d], ++in_flight);
      if (kind_info(a.kind).frees_micro_batch) --in_flight;
    }
  }
  t.makespan = replayed.makespan;
  double busy = 0;
  for (double b : t.busy) busy += b;
  t.bubble_fraction = t.makespan > 0 ? 1.0 - busy / (static_cast<double>(devices) * t.makespan) : 0;
  return t;
}

std::string render_grid(const Timeline& t) {
  // One cell per time unit; a cell followed by a zero-duration update gets a '*'.
  const int columns = static_cast<int>(std::lround(t.makespan));
  bool shared = false;  // a device holds several stages: cells name the stage
  for (const auto& row : t.devices) {
    std::set<int> stages;
    for (const TimedAction& a : row) stages.insert(a.action.stage);
    shared = shared || stages.size() > 1;
  }
  const auto label = [&](const Action& a) { return shared ? a.str() : a.text(); };
  size_t width = 2;
  for (const auto& row : t.devices) {
    for (const TimedAction& a : row) width = std::max(width, label(a.action).size() + 1);
  }
  std::string out;
  for (size_t r = 0; r < t.devices.size(); ++r) {
    std::vector<std::string> cells(static_cast<size_t>(std::max(columns, 0)), ".");
    for (const TimedAction& a : t.devices[r]) {
      const int start = static_cast<int>(std::lround(a.start));
      const int end = static_cast<int>(std::lround(a.end));
      if (end == start) {
        if (start > 0 && start <= columns) cells[static_cast<size_t>(start - 1)] += "*";
        continue;
      }
      for (int c = start; c < end && c < columns; ++c) {
        cells[static_cast<size_t>(c)] = c == start ? label(a.action) : "=";
      }
    }
    std::string line = shared ? fmt::format("d{:<2} |", r) : fmt::format("stage {:>2} |", r);
    for (const std::string& c : cells) line += fmt::format(" {:<{}}", c, width);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace pipelab
