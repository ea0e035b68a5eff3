#pragma once
/// Conversions between YAML nodes and option field types, with error messages that name
/// the expected type. Specialise ConfigValue<T> to support a new field type.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config/config_node.h"

namespace pipelab {

template <class T, class Enable = void>
struct ConfigValue;

namespace detail {
[[noreturn]] void fail_type(const ConfigNode& node, const std::string& expected);
}  // namespace detail

template <>
struct ConfigValue<bool> {
  static std::string type() { return "true or false"; }
  static bool read(const ConfigNode& n);
  static YAML::Node write(bool v) { return YAML::Node(v); }
};

template <>
struct ConfigValue<int64_t> {
  static std::string type() { return "an integer"; }
  static int64_t read(const ConfigNode& n);
  static YAML::Node write(int64_t v) { return YAML::Node(v); }
};

template <>
struct ConfigValue<int> {
  static std::string type() { return "an integer"; }
  static int read(const ConfigNode& n);
  static YAML::Node write(int v) { return YAML::Node(v); }
};

template <>
struct ConfigValue<double> {
  static std::string type() { return "a number"; }
  static double read(const ConfigNode& n);
  static YAML::Node write(double v);
};

template <>
struct ConfigValue<std::string> {
  static std::string type() { return "a string"; }
  static std::string read(const ConfigNode& n);
  static YAML::Node write(const std::string& v) { return YAML::Node(v); }
};

template <class T>
struct ConfigValue<std::vector<T>> {
  /// "a list of integers" (the element's type without its article, pluralised).
  static std::string type() {
    std::string one = ConfigValue<T>::type();
    for (const char* article : {"a ", "an "}) {
      if (one.rfind(article, 0) == 0) one = one.substr(std::string(article).size());
    }
    return "a list of " + one + "s";
  }
  static std::vector<T> read(const ConfigNode& n) {
    if (!n.yaml().IsSequence()) detail::fail_type(n, type() + " like [1, 2]");
    std::vector<T> out;
    for (size_t i = 0; i < n.yaml().size(); ++i) {
      out.push_back(ConfigValue<T>::read(
          ConfigNode(n.yaml()[i], n.source(), fmt::format("{}[{}]", n.path(), i))));
    }
    return out;
  }
  static YAML::Node write(const std::vector<T>& v) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const T& x : v) out.push_back(ConfigValue<T>::write(x));
    out.SetStyle(YAML::EmitterStyle::Flow);
    return out;
  }
};

/// std::optional<T>: absent or null means "not set".
template <class T>
struct ConfigValue<std::optional<T>> {
  static std::string type() { return ConfigValue<T>::type() + " or null"; }
  static std::optional<T> read(const ConfigNode& n) {
    if (n.yaml().IsNull()) return std::nullopt;
    return ConfigValue<T>::read(n);
  }
  static YAML::Node write(const std::optional<T>& v) {
    return v ? ConfigValue<T>::write(*v) : YAML::Node(YAML::NodeType::Null);
  }
};

/// Formats a field value for messages and docs (flow YAML).
template <class T>
std::string describe_value(const T& v) {
  YAML::Emitter e;
  e << YAML::Flow << ConfigValue<T>::write(v);
  return e.c_str();
}

}  // namespace pipelab
