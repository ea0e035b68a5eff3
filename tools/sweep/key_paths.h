#pragma once
/// The values at dotted key paths (core/config/key_paths.h walks the paths), as sweeps (grid
/// values in a cell's experiment) and reports (row, column and metric keys read back from
/// config.yaml and summary.json) compare, label and list them.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/key_paths.h"

namespace pipelab::tools {

using ::pipelab::find_path;
using ::pipelab::paths_overlap;
using ::pipelab::set_path;
using ::pipelab::split_key_path;


/// Structural equality of two YAML values; scalars that both read as numbers compare as
/// numbers (so 0.05 equals 5.0e-2), others as text. An undefined node equals nothing.
bool same_value(const YAML::Node& a, const YAML::Node& b);

/// The number `text` spells, when all of it is one ("0.05", "1e+30", "inf"); else nullopt.
std::optional<double> parse_number(const std::string& text);

/// A one-line text of a value for labels: scalars as written, lists as "a-b-c", maps as
/// flow YAML, null as "null".
std::string value_text(const YAML::Node& value);

/// The leaves under `node` as (key path, value_text): maps are descended (the path grows by
/// ".key"), lists and scalars are leaves. `prefix` is the path of `node` itself.
void flatten_leaves(const std::string& prefix, const YAML::Node& node,
                    std::vector<std::pair<std::string, std::string>>& out);

/// Emits a node as block YAML text ending in a newline.
std::string emit_yaml(const YAML::Node& node);

}  // namespace pipelab::tools
