#pragma once
/// Which costs a replay used, and how far costs of that kind were found from measured runs:
/// the figure `simulate`, `plan` and a run's simulated clock print beside their numbers, so a
/// reader knows what a predicted time is worth (docs/simulate.md, "Costs: measured, given or
/// derived"). Each figure is one this project measured and keeps in its docs; a new
/// validation round updates it here and there together.
#include <string>

namespace pipelab::sim {

enum class CostKind {
  Measured,    ///< a run's own metrics/costs.json
  Given,       ///< a costs file written by hand (the same keys in YAML)
  Timed,       ///< each block timed on this machine (--time-blocks)
  Calibrated,  ///< derived per operator class from a cluster file's device.classes
  Derived,     ///< derived from a device's peak rates (a preset or --device-flops)
};

/// "measured", "given", "timed here", "calibrated", "derived".
const char* cost_kind_name(CostKind kind);

/// How far costs of this kind were found from measured runs, and where that is written.
std::string cost_validation(CostKind kind);

}  // namespace pipelab::sim
