#pragma once
/// Presets: named sets of settings a file carries for another use of itself, chosen on the
/// command line. The seed experiments' `cpu-mini` is one: each seed in miniature on a laptop
/// CPU (docs/sweeps.md). In the file:
///
///     presets:
///       cpu-mini: {run.epochs: 1, dataset.limit: 256, run.devices: [cpu]}
///
/// and `pipelab sweep FILE --preset cpu-mini`, the same as `--set preset=cpu-mini`. A setting
/// is a key path and a value, as --set takes them; the user's own --set values win over the
/// preset's. A sweep applies the preset's settings outside `sweep.` to every cell again, last,
/// so they hold over the cells' own include and override entries (tools/sweep/plan.cpp).
#include <yaml-cpp/yaml.h>

#include "core/config/config_node.h"

namespace pipelab {

/// Checks the top-level `presets:` section (whether or not one is chosen), applies the
/// settings of the one the top-level `preset:` key names, records each in `source` (where it
/// was written, and ConfigSource::preset_settings) and removes both keys from `root`.
/// ConfigError for a name the file has no preset of, or a malformed section.
void apply_preset(YAML::Node& root, ConfigSource& source);

}  // namespace pipelab
