#include "core/schedule/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/schedule/dataflow.h"
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

Timeline simulate_timeline(const Schedule& s, const CostModel& costs) {
  const size_t stages = static_cast<size_t>(s.stages());
  PIPELAB_ASSERT(costs.forward.size() == stages && costs.backward.size() == stages &&
                     costs.update.size() == stages && (costs.head.empty() || costs.head.size() == stages),
                 "cost model has {} stages, schedule {}", costs.forward.size(), stages);
  Timeline t;
  t.stages.resize(stages);
  t.busy.assign(stages, 0);
  std::vector<double> free_at(stages, 0);
  std::map<std::tuple<int, char, int>, double> finished;  // (stage, kind, mb) -> end time
  // Synchronized updates: the k-th update of every stage starts when the last stage is ready.
  std::vector<size_t> updates_seen(stages, 0);
  std::vector<double> barrier;  // start of the k-th synchronized update
  const WalkResult walk = walk_schedule(s, [&](int r, size_t i) {
    const Action& a = s.stage(r)[i];
    const size_t ur = static_cast<size_t>(r);
    double start = free_at[ur];
    for (const auto& [q, dep] : s.dependencies(r, a)) {
      start = std::max(start, finished.at({q, static_cast<char>(dep.kind), dep.mb}) + costs.transfer);
    }
    if (a.kind == ActionKind::Update && s.links.synchronized_updates) {
      const size_t k = updates_seen[ur]++;
      if (barrier.size() <= k) {
        // The walk visits a k-th update only once every stage has reached its k-th update,
        // so every stage's free time is known: the update waits for the latest of them.
        double latest = 0;
        for (size_t q = 0; q < stages; ++q) latest = std::max(latest, free_at[q]);
        barrier.push_back(latest + costs.transfer);
      }
      start = std::max(start, barrier[k]);
    }
    const double cost = a.kind == ActionKind::Forward    ? costs.forward[ur]
                        : a.kind == ActionKind::Head     ? (costs.head.empty() ? 0.0 : costs.head[ur])
                        : a.kind == ActionKind::Backward ? costs.backward[ur]
                                                         : costs.update[ur];
    const double end = start + cost;
    free_at[ur] = end;
    t.busy[ur] += cost;
    t.stages[ur].push_back({a, start, end});
    if (a.kind != ActionKind::Update) finished[{r, static_cast<char>(a.kind), a.mb}] = end;
  });
  PIPELAB_ASSERT(walk.complete, "simulate_timeline needs a deadlock-free schedule");
  t.makespan = stages ? *std::max_element(free_at.begin(), free_at.end()) : 0;
  double busy = 0;
  for (double b : t.busy) busy += b;
  t.bubble_fraction = t.makespan > 0 ? 1.0 - busy / (static_cast<double>(stages) * t.makespan) : 0;
  return t;
}

std::string render_grid(const Timeline& t) {
  // One cell per time unit; a cell followed by a zero-duration update gets a '*'.
  const int columns = static_cast<int>(std::lround(t.makespan));
  size_t width = 2;
  for (const auto& row : t.stages) {
    for (const TimedAction& a : row) width = std::max(width, a.action.text().size() + 1);
  }
  std::string out;
  for (size_t r = 0; r < t.stages.size(); ++r) {
    std::vector<std::string> cells(static_cast<size_t>(std::max(columns, 0)), ".");
    for (const TimedAction& a : t.stages[r]) {
      const int start = static_cast<int>(std::lround(a.start));
      const int end = static_cast<int>(std::lround(a.end));
      if (end == start) {
        if (start > 0 && start <= columns) cells[static_cast<size_t>(start - 1)] += "*";
        continue;
      }
      for (int c = start; c < end && c < columns; ++c) {
        cells[static_cast<size_t>(c)] = c == start ? a.action.text() : "=";
      }
    }
    std::string line = fmt::format("stage {:>2} |", r);
    for (const std::string& c : cells) line += fmt::format(" {:<{}}", c, width);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace pipelab
