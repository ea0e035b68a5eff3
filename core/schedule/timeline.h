#pragma once
/// Replays a schedule against a cost model (docs/design.md, "Timeline simulation"): makespan,
/// per-device busy time and the bubble fraction, without running any kernels.
#include <string>
#include <vector>

#include "core/schedule/event_sim.h"
#include "core/schedule/schedule.h"

namespace pipelab {

/// Per compute kind and stage, the seconds of one action, plus a fixed transfer time per
/// message. A kind without figures of its own costs its fallback's share (the kind table:
/// I and W half a B each); communication actions cost nothing but the transfer.
struct CostModel {
  PerKind<std::vector<double>> seconds;
  double transfer = 0;
  /// Same costs on every stage (e.g. F = 1, B = 1 for a clock-cycle picture); an auxiliary
  /// head's backward (H) costs `head`.
  static CostModel uniform(int stages, double forward, double backward, double update = 0, double head = 0.5);
  /// The zero-bubble papers' unit costs: F, B (= our I, the input gradient) and W, so that a
  /// whole backward costs B + W.
  static CostModel split(int stages, double forward, double input, double weight);
  /// The duration of action `a`.
  double cost(const Action& a) const;
};

struct Timeline {
  /// Per device, its compute actions in time.
  std::vector<std::vector<TimedAction>> devices;
  double makespan = 0;
  /// Per device, the time it computes.
  std::vector<double> busy;
  /// 1 - (total busy time) / (devices x makespan): the idle share of the devices.
  double bubble_fraction = 0;
  /// Per device, the most micro-batches whose forward ran and whose backward (B or W) has not
  /// (over all the stages it holds): what it keeps in memory.
  std::vector<int> peak_in_flight;
};

/// Simulates `s` (lowered first if it has no communication; it must be valid) under `costs`.
Timeline simulate_timeline(const Schedule& s, const CostModel& costs);

/// A text grid with one column per time unit (costs must be whole numbers), e.g.
///   stage 0 | F0 F1 .. .. B1 B0 U
/// Rows are devices; a device that holds several stages names them ("d0 | 0F0 4F0 ...").
std::string render_grid(const Timeline& t);

}  // namespace pipelab
