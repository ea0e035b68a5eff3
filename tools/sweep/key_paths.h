#pragma once
/// Dotted key paths ("scheme.chunks") into YAML trees, shared by sweeps (setting grid
/// values in a cell's experiment) and reports (reading row, column and metric keys back
/// from config.yaml and summary.json).
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipelab::tools {

/// The segments of "a.b.c"; empty when the path is empty or has an empty segment ("a..b").
std::vector<std::string> split_key_path(const std::string& path);

/// True when `a` and `b` are the same key path or one lies inside the other ("scheme" and
/// "scheme.type"): setting both in one place would make one of them silently win.
bool paths_overlap(const std::string& a, const std::string& b);

/// The node at `path` under `root`, or an undefined node when some segment is missing.
YAML::Node find_path(const YAML::Node& root, const std::string& path);

/// Sets `path` under `root` to a copy of `value`, creating (or replacing non-map) sections on
/// the way.
void set_path(YAML::Node& root, const std::string& path, const YAML::Node& value);

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
