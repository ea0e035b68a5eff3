#pragma once
/// Every YAML text pipelab reads (experiment and sweep files, --set values, cost files, a
/// run's config.yaml and summary.json) goes through parse_yaml, which bounds what yaml-cpp
/// would otherwise follow without limit: an alias inside its own anchor (a cycle that makes
/// any walk over the tree recurse forever), aliases that expand exponentially (a "billion
/// laughs" bomb), nesting deeper than any configuration needs, and NUL bytes. Each is a
/// ConfigError naming the file and line:column.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

namespace pipelab {

/// Limits parse_yaml enforces, with aliases expanded.
inline constexpr uint64_t kMaxYamlValues = 1'000'000;
inline constexpr int kMaxYamlDepth = 200;

/// Parses `text` (the first document), checked as above and by check_yaml_keys. `source`
/// names it in errors ("exp.yaml", "--set run.x=..."). A syntax error is a ConfigError with
/// line:column.
YAML::Node parse_yaml(const std::string& text, const std::string& source);

/// Reads and parses a YAML (or JSON) file: read_file's checks (a regular file, not a FIFO),
/// then parse_yaml.
YAML::Node load_yaml_file(const std::string& path);

/// ConfigError for what yaml-cpp accepts silently: a key given twice in one mapping (the
/// first would win) and YAML merge keys (`<<`, which yaml-cpp reads as a plain key).
/// parse_yaml applies it. `file` names the source.
void check_yaml_keys(const YAML::Node& node, const std::string& file);

}  // namespace pipelab
