#pragma once
/// One function per options struct reads, writes and documents it (Drake/gem5 style):
///
///   struct SgdOptions {
///     double lr = 0;  double momentum = 0;
///     template <class V> void fields(V& v) {
///       v.required("lr", lr, "learning rate", positive);
///       v("momentum", momentum, "momentum factor mu", in_range(0.0, 1.0));
///     }
///   };
///
/// FieldReader fills it from YAML (unknown keys, wrong types and out-of-range values are
/// ConfigErrors with line:column and the fix), FieldWriter emits the resolved values, and
/// FieldDoc lists the fields for `pipelab list --options`.
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/config/value.h"
#include "core/util/names.h"

namespace pipelab {

/// Named values of an enum-like field.
template <class E>
using Choices = std::vector<std::pair<std::string, E>>;

/// A check returns the requirement ("a number > 0") when the value violates it, else "".
struct Positive {
  template <class T>
  std::string operator()(const T& v) const { return v > 0 ? "" : "a number > 0"; }
};
struct NonNegative {
  template <class T>
  std::string operator()(const T& v) const { return v >= 0 ? "" : "a number >= 0"; }
};
/// lo <= v <= hi (or < hi when `open_high`).
struct InRange {
  double lo, hi;
  bool open_high = false;
  template <class T>
  std::string operator()(const T& v) const {
    const bool ok = v >= lo && (open_high ? v < hi : v <= hi);
    return ok ? "" : fmt::format("a number in [{}, {}{}", lo, hi, open_high ? ")" : "]");
  }
};
/// lo < v <= hi: a positive quantity with a sane ceiling (a learning rate of 1e300 would
/// overflow float32 inside the optimizer).
struct InOpenLow {
  double lo, hi;
  template <class T>
  std::string operator()(const T& v) const {
    return v > lo && v <= hi ? "" : fmt::format("a number in ({}, {}]", lo, hi);
  }
};
/// Every element of a list passes `check`, and the list is not empty.
template <class C>
struct EachOf {
  C check;
  template <class T>
  std::string operator()(const std::vector<T>& v) const {
    if (v.empty()) return "a non-empty list";
    for (const T& x : v) {
      std::string r = check(x);
      if (!r.empty()) return "a list whose elements are each " + r;
    }
    return "";
  }
};
struct NonEmpty {
  template <class T>
  std::string operator()(const T& v) const { return v.empty() ? "a non-empty value" : ""; }
};

inline constexpr Positive positive{};
inline constexpr NonNegative non_negative{};
inline constexpr NonEmpty non_empty{};
inline InRange in_range(double lo, double hi) { return {lo, hi, false}; }
inline InRange in_half_open(double lo, double hi) { return {lo, hi, true}; }
inline InOpenLow in_open_low(double lo, double hi) { return {lo, hi}; }
template <class C>
EachOf<C> each(C c) { return {c}; }

/// Reads an options struct from a YAML mapping.
class FieldReader {
 public:
  /// `also_known` lists keys handled elsewhere (e.g. "type" of a polymorphic section).
  explicit FieldReader(const ConfigNode& node, std::set<std::string> also_known = {})
      : node_(node), known_(std::move(also_known)) {
    node_.expect_map("options");
  }

  /// An optional field: absent keeps the default already in `value`.
  template <class T, class... C>
  void operator()(const std::string& key, T& value, const char* /*doc*/, C&&... checks) {
    known_.insert(key);
    if (!node_.has(key)) return;
    const ConfigNode n = node_.child(key);
    value = ConfigValue<T>::read(n);
    run_checks(n, value, checks...);
  }

  /// A field the user must set.
  template <class T, class... C>
  void required(const std::string& key, T& value, const char* doc, C&&... checks) {
    if (!node_.has(key)) {
      node_.fail(fmt::format("missing required key '{}' ({})", key, doc),
                 fmt::format("add `{}: <{}>` to {}", key, ConfigValue<T>::type(),
                             node_.path().empty() ? "the file" : node_.path()));
    }
    (*this)(key, value, doc, checks...);
  }

  /// An enum-like field written as one of the names in `choices`.
  template <class E>
  void choice(const std::string& key, E& value, const Choices<E>& choices, const char* /*doc*/) {
    known_.insert(key);
    if (!node_.has(key)) return;
    const ConfigNode n = node_.child(key);
    const std::string name = ConfigValue<std::string>::read(n);
    std::vector<std::string> names;
    for (const auto& [text, v] : choices) {
      if (text == name) {
        value = v;
        return;
      }
      names.push_back(text);
    }
    n.fail(fmt::format("'{}' is not one of {}", name, join(names, ", ")),
           fmt::format("use one of: {}", join(closest_first(name, names), ", ")));
  }

  /// A nested options struct (its own `fields`); absent keeps its defaults.
  template <class S>
  void section(const std::string& key, S& sub, const char* /*doc*/) {
    known_.insert(key);
    if (!node_.has(key)) return;
    FieldReader reader(node_.child(key));
    sub.fields(reader);
    reader.finish();
  }

  /// An option that does something only when `used` (another option is set, say): given
  /// while it is not, it is an error at `key` saying what it needs. The one mechanism by
  /// which an options struct refuses what it would ignore.
  void unused_unless(const std::string& key, bool used, const std::string& needs) const {
    if (used || !node_.has(key)) return;
    node_.child(key).fail(fmt::format("{} does nothing unless {}", key, needs),
                          fmt::format("remove {}, or give what it needs", key));
  }

  /// Fails on the first key that no field claimed.
  void finish() const;

  const ConfigNode& node() const { return node_; }

 private:
  /// An optional that is not set (absent, or null as a resolved configuration writes it)
  /// has nothing to check; a set one is checked as its value.
  template <class T, class... C>
  void run_checks(const ConfigNode& n, const std::optional<T>& value, C&&... checks) {
    if (value) run_checks(n, *value, checks...);
  }
  template <class T, class... C>
  void run_checks(const ConfigNode& n, const T& value, C&&... checks) {
    std::string problem;
    ((problem.empty() ? (void)(problem = checks(value)) : void()), ...);
    if (!problem.empty()) {
      n.fail(fmt::format("must be {}, got {}", problem, describe_value(value)),
             fmt::format("set {} to {}", n.path(), problem));
    }
  }

  ConfigNode node_;
  std::set<std::string> known_;
};

/// Writes an options struct as a YAML mapping (the resolved configuration).
class FieldWriter {
 public:
  template <class T, class... C>
  void operator()(const std::string& key, const T& value, const char*, C&&...) {
    out_[key] = ConfigValue<T>::write(value);
  }
  template <class T, class... C>
  void required(const std::string& key, const T& value, const char* doc, C&&... c) {
    (*this)(key, value, doc, c...);
  }
  template <class E>
  void choice(const std::string& key, const E& value, const Choices<E>& choices, const char*) {
    for (const auto& [text, v] : choices) {
      if (v == value) out_[key] = text;
    }
  }
  /// An option that does nothing is left out, so that the resolved configuration reads back
  /// (FieldReader refuses it there).
  void unused_unless(const std::string& key, bool used, const std::string&) {
    if (!used) out_.remove(key);
  }
  template <class S>
  void section(const std::string& key, const S& sub, const char*) {
    FieldWriter w;
    const_cast<S&>(sub).fields(w);
    out_[key] = w.node();
  }
  const YAML::Node& node() const { return out_; }

 private:
  YAML::Node out_{YAML::NodeType::Map};
};

/// One documented field.
struct FieldInfo {
  std::string key, type, default_value, doc;
  bool required = false;
};

/// Lists an options struct's fields with types, defaults and descriptions.
class FieldDoc {
 public:
  template <class T, class... C>
  void operator()(const std::string& key, const T& value, const char* doc, C&&...) {
    rows_.push_back({prefix_ + key, ConfigValue<T>::type(), describe_value(value), doc, false});
  }
  template <class T, class... C>
  void required(const std::string& key, const T& value, const char* doc, C&&...) {
    rows_.push_back({prefix_ + key, ConfigValue<T>::type(), "", doc, true});
  }
  template <class E>
  void choice(const std::string& key, const E& value, const Choices<E>& choices, const char* doc) {
    std::vector<std::string> names;
    std::string current;
    for (const auto& [text, v] : choices) {
      names.push_back(text);
      if (v == value) current = text;
    }
    rows_.push_back({prefix_ + key, join(names, " | "), current, doc, false});
  }
  /// Adds "(only when ...)" to the field's description.
  void unused_unless(const std::string& key, bool, const std::string& needs) {
    for (FieldInfo& row : rows_) {
      if (row.key == prefix_ + key) row.doc += " (only when " + needs + ")";
    }
  }
  template <class S>
  void section(const std::string& key, const S& sub, const char*) {
    FieldDoc inner;
    inner.prefix_ = prefix_ + key + ".";
    const_cast<S&>(sub).fields(inner);
    rows_.insert(rows_.end(), inner.rows_.begin(), inner.rows_.end());
  }
  const std::vector<FieldInfo>& rows() const { return rows_; }

 private:
  std::string prefix_;
  std::vector<FieldInfo> rows_;
};

namespace detail {
template <class O>
auto check_options(const O& o, const ConfigNode& n, int) -> decltype(o.check(n), void()) {
  o.check(n);
}
template <class O>
void check_options(const O&, const ConfigNode&, long) {}
}  // namespace detail

/// Reads options of type O from `node`, rejecting unknown keys. If O has
/// `void check(const ConfigNode&) const`, it runs last for checks across fields.
template <class O>
O read_options(const ConfigNode& node, std::set<std::string> also_known = {}) {
  O options;
  FieldReader reader(node, std::move(also_known));
  options.fields(reader);
  reader.finish();
  detail::check_options(options, node, 0);
  return options;
}

/// The resolved options as a YAML mapping.
template <class O>
YAML::Node write_options(const O& options) {
  FieldWriter writer;
  const_cast<O&>(options).fields(writer);
  return writer.node();
}

/// The documented fields of O (defaults from a default-constructed O).
template <class O>
std::vector<FieldInfo> document_options() {
  O options;
  FieldDoc doc;
  options.fields(doc);
  return doc.rows();
}

}  // namespace pipelab
