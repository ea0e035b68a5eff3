#pragma once
/// What a training step of this run would take on other devices: `pipelab run --cluster`
/// replays the run's own compiled plan on the simulator (tools/simulate) and hands the step
/// time here, so that steps.csv and epochs.csv carry simulated time beside the measured one
/// (docs/time-to-accuracy.md). Every step of a run is a whole mini-batch (the training
/// loader drops a last partial one), so one step time serves them all.
#include <string>

namespace pipelab {

struct SimulatedClock {
  double step_seconds = 0;  ///< 0: no cluster given, the simulated columns stay null
  std::string cluster;      ///< what was simulated, for the log and summary.json
  std::string costs;        ///< which costs: measured, given, timed here, calibrated, derived
  std::string checked;      ///< how far such costs were found from measured runs (docs/simulate.md)
  int devices = 0;
  /// Why the simulated devices could not run this plan as it is (it does not fit their
  /// memory), said with the clock; "" when they can.
  std::string warning;
  bool on() const { return step_seconds > 0; }
};

}  // namespace pipelab
