#include "core/config/value.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace pipelab {
namespace detail {

void fail_type(const ConfigNode& node, const std::string& expected) {
  std::string got;
  if (node.yaml().IsSequence()) {
    got = "a list";
  } else if (node.yaml().IsMap()) {
    got = "a mapping";
  } else if (node.yaml().IsNull()) {
    got = "nothing (null)";
  } else {
    got = "'" + node.text() + "'";
  }
  node.fail(fmt::format("expected {}, got {}", expected, got),
            fmt::format("set {} to {}", node.path(), expected));
}

}  // namespace detail

bool ConfigValue<bool>::read(const ConfigNode& n) {
  const std::string t = n.text();
  if (n.yaml().IsScalar()) {
    if (t == "true" || t == "True" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "False" || t == "no" || t == "off") return false;
  }
  detail::fail_type(n, type());
}

int64_t ConfigValue<int64_t>::read(const ConfigNode& n) {
  if (n.yaml().IsScalar()) {
    const std::string t = n.text();
    try {
      size_t used = 0;
      const long long v = std::stoll(t, &used, 0);
      if (used == t.size()) return v;
      // A whole number in exponent form (samples: 1e5).
      const double d = std::stod(t, &used);
      if (used == t.size() && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
        return static_cast<int64_t>(d);
      }
    } catch (const std::exception&) {
    }
  }
  detail::fail_type(n, "an integer (at most 9.2e18)");
}

int ConfigValue<int>::read(const ConfigNode& n) {
  const int64_t v = ConfigValue<int64_t>::read(n);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    detail::fail_type(n, "an integer that fits in 32 bits");
  }
  return static_cast<int>(v);
}

double ConfigValue<double>::read(const ConfigNode& n) {
  if (n.yaml().IsScalar()) {
    const std::string t = n.text();
    try {
      size_t used = 0;
      const double v = std::stod(t, &used);
      if (used == t.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
  }
  detail::fail_type(n, "a finite number");
}

YAML::Node ConfigValue<double>::write(double v) {
  // Shortest text that reads back as the same double.
  std::ostringstream s;
  s.precision(17);
  s << v;
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << v;
    if (std::stod(t.str()) == v) return YAML::Node(t.str());
  }
  return YAML::Node(s.str());
}

std::string ConfigValue<std::string>::read(const ConfigNode& n) {
  if (!n.yaml().IsScalar()) detail::fail_type(n, type());
  return n.text();
}

}  // namespace pipelab
