#pragma once
/// Replays a schedule against a cost model (docs/design.md, "Timeline simulation"): makespan,
/// per-stage busy time and the bubble fraction, without running any kernels.
#include <string>
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// Per-stage durations of F, H, B and U, plus a fixed transfer time per message.
struct CostModel {
  std::vector<double> forward, head, backward, update;
  double transfer = 0;
  /// Same costs on every stage (e.g. F = 1, B = 1 for a clock-cycle picture); an auxiliary
  /// head's backward (H) costs `head`.
  static CostModel uniform(int stages, double forward, double backward, double update = 0, double head = 0.5);
};

/// One action placed in time.
struct TimedAction {
  Action action;
  double start = 0, end = 0;
};

struct Timeline {
  std::vector<std::vector<TimedAction>> stages;
  double makespan = 0;
  std::vector<double> busy;
  /// 1 - (total busy time) / (stages x makespan): the idle share of the devices.
  double bubble_fraction = 0;
};

/// Simulates `s` (which must be valid) under `costs`.
Timeline simulate_timeline(const Schedule& s, const CostModel& costs);

/// A text grid with one column per time unit (costs must be whole numbers), e.g.
///   stage 0 | F0 F1 .. .. B1 B0 U
std::string render_grid(const Timeline& t);

}  // namespace pipelab
