#include "tools/sweep/key_paths.h"

#include <cmath>

namespace pipelab::tools {
namespace {

/// The scalar as a finite number, if all of its text reads as one.
std::optional<double> as_number(const YAML::Node& n) {
  if (!n.IsScalar()) return std::nullopt;
  const std::optional<double> v = parse_number(n.Scalar());
  return v && std::isfinite(*v) ? v : std::nullopt;
}

/// `n` and everything under it in flow style: a node read from block YAML keeps its block
/// style, which the emitter's Flow manipulator does not override below the top level.
void set_flow(YAML::Node n) {
  if (!n.IsMap() && !n.IsSequence()) return;
  n.SetStyle(YAML::EmitterStyle::Flow);
  if (n.IsSequence()) {
    for (YAML::Node child : n) set_flow(child);
  } else {
    for (auto kv : n) set_flow(kv.second);
  }
}

/// One line of YAML: a label (`pipelab table` rows, a sweep name's value) never spans lines.
std::string flow_yaml(const YAML::Node& n) {
  const YAML::Node copy = YAML::Clone(n);
  set_flow(copy);
  YAML::Emitter e;
  e << YAML::Flow << copy;
  return e.c_str();
}

}  // namespace

std::optional<double> parse_number(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {  // not a number, or out of range
  }
  return std::nullopt;
}

bool same_value(const YAML::Node& a, const YAML::Node& b) {
  if (!a.IsDefined() || !b.IsDefined()) return false;
  if (a.Type() != b.Type()) return false;
  switch (a.Type()) {
    case YAML::NodeType::Null:
      return true;
    case YAML::NodeType::Scalar: {
      const auto x = as_number(a), y = as_number(b);
      return x && y ? *x == *y : a.Scalar() == b.Scalar();
    }
    case YAML::NodeType::Sequence:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!same_value(a[i], b[i])) return false;
      }
      return true;
    case YAML::NodeType::Map:
      if (a.size() != b.size()) return false;
      for (const auto& kv : a) {
        if (!same_value(kv.second, b[kv.first.Scalar()])) return false;
      }
      return true;
    default:
      return false;
  }
}

std::string value_text(const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return "null";
  if (value.IsScalar()) return value.Scalar();
  if (value.IsSequence()) {
    std::string out;
    for (size_t i = 0; i < value.size(); ++i) {
      out += (i ? "-" : "") + (value[i].IsScalar() ? value[i].Scalar() : flow_yaml(value[i]));
    }
    return out;
  }
  return flow_yaml(value);
}

void flatten_leaves(const std::string& prefix, const YAML::Node& node,
                    std::vector<std::pair<std::string, std::string>>& out) {
  if (node.IsMap() && node.size() > 0) {
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      flatten_leaves(prefix.empty() ? key : prefix + "." + key, kv.second, out);
    }
    return;
  }
  out.emplace_back(prefix, value_text(node));
}

std::string emit_yaml(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str()) + "\n";
}

}  // namespace pipelab::tools
