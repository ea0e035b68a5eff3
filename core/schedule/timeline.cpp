#include "core/schedule/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/schedule/dataflow.h"
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
  const size_t devices = static_cast<size_t>(s.devices());
  Timeline t;
  t.devices.resize(devices);
  t.busy.assign(devices, 0);
  t.peak_in_flight.assign(devices, 0);
  std::vector<int> in_flight(devices, 0);
  std::vector<double> free_at(devices, 0);
  std::map<std::tuple<int, char, int>, double> sent_at;  // message -> time it left
  std::vector<size_t> collectives_seen(devices, 0);
  std::vector<double> barrier;  // start of the k-th ALLREDUCE
  const WalkResult walk = walk_schedule(s, [&](int dev, size_t i) {
    const Action& a = s.device(dev)[i];
    const size_t d = static_cast<size_t>(dev);
    double start = free_at[d];
    if (is_receive(a.kind)) start = std::max(start, sent_at.at(message_key(a)) + costs.transfer);
    if (a.kind == ActionKind::AllReduce) {
      const size_t k = collectives_seen[d]++;
      if (barrier.size() <= k) {
        // The walk visits a k-th ALLREDUCE only once every device has reached its k-th, so
        // every device's free time is known: the collective waits for the latest of them.
        barrier.push_back(*std::max_element(free_at.begin(), free_at.end()) + costs.transfer);
      }
      start = std::max(start, barrier[k]);
    }
    const double end = start + costs.cost(a);
    free_at[d] = end;
    if (is_send(a.kind)) sent_at[message_key(a)] = end;
    if (!is_compute(a.kind)) return;
    t.busy[d] += end - start;
    t.devices[d].push_back({a, start, end});
    if (a.kind == ActionKind::Forward) t.peak_in_flight[d] = std::max(t.peak_in_flight[d], ++in_flight[d]);
    if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) --in_flight[d];
  });
  PIPELAB_ASSERT(walk.complete, "simulate_timeline needs a deadlock-free schedule");
  t.makespan = devices ? *std::max_element(free_at.begin(), free_at.end()) : 0;
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
