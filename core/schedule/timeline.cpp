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
  c.forward.assign(static_cast<size_t>(stages), forward);
  c.head.assign(static_cast<size_t>(stages), head);
  c.backward.assign(static_cast<size_t>(stages), backward);
  c.update.assign(static_cast<size_t>(stages), update);
  return c;
}

CostModel CostModel::split(int stages, double forward, double input, double weight) {
  CostModel c = uniform(stages, forward, input + weight, 0, 0.5 * (input + weight));
  c.backward_input.assign(static_cast<size_t>(stages), input);
  c.backward_weight.assign(static_cast<size_t>(stages), weight);
  return c;
}

double CostModel::cost(const Action& a) const {
  const size_t r = static_cast<size_t>(a.stage);
  const auto at = [&](const std::vector<double>& v) { return v.empty() ? 0.0 : v.at(r); };
  switch (a.kind) {
    case ActionKind::Forward: return at(forward);
    case ActionKind::Backward: return at(backward);
    case ActionKind::BackwardInput: return backward_input.empty() ? 0.5 * at(backward) : at(backward_input);
    case ActionKind::BackwardWeight: return backward_weight.empty() ? 0.5 * at(backward) : at(backward_weight);
    case ActionKind::Head: return at(head);
    case ActionKind::Update: return at(update);
    default: return 0;
  }
}

Timeline simulate_timeline(const Schedule& in, const CostModel& costs) {
  const Schedule s = with_communication(in);
  const size_t stages = static_cast<size_t>(s.stages());
  PIPELAB_ASSERT(costs.forward.size() == stages && costs.backward.size() == stages,
                 "cost model has {} stages, schedule {}", costs.forward.size(), stages);
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
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) --in_flight;
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
