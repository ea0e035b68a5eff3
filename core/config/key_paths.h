#pragma once
/// Dotted key paths ("scheme.chunks") into YAML trees: the one walk that --set, presets,
/// sweeps' grid values and reports' row and column keys share.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace pipelab {

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

}  // namespace pipelab
