#pragma once
/// A simulated (or measured) run as a standalone SVG: one row per device with a box per
/// compute action ("2F0"), coloured by kind, on a time axis; below it each device's memory
/// over time. What `pipelab simulate --svg` writes and docs/simulate.md shows.
#include <string>

#include "tools/simulate/simulate.h"

namespace pipelab::sim {

/// The SVG text. Boxes carry class `action` and data-action ("2F0"); memory lines class
/// `memory` with data-device.
std::string render_timeline_svg(const SimResult& r, const std::string& title);

}  // namespace pipelab::sim
