#pragma once
/// A small JSON writer for metrics lines and summaries (reading JSON back goes through
/// yaml-cpp, which parses JSON). Numbers print in their shortest round-trip form, so
/// identical runs write identical bytes; non-finite numbers become null.
#include <cstdint>
#include <string>
#include <vector>

namespace pipelab::json {

/// A JSON string literal with escapes.
std::string quote(const std::string& s);
/// A JSON number (null for NaN/inf).
std::string number(double v);

/// Builds one JSON object, keys in insertion order.
class Object {
 public:
  Object& add(const std::string& key, double v);
  Object& add(const std::string& key, int64_t v);
  Object& add(const std::string& key, int v) { return add(key, static_cast<int64_t>(v)); }
  Object& add(const std::string& key, bool v);
  Object& add(const std::string& key, const std::string& v);
  Object& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  Object& add(const std::string& key, const std::vector<double>& v);
  /// `raw` must already be JSON (an object, array, ...).
  Object& add_raw(const std::string& key, const std::string& raw);
  /// Compact single-line form.
  std::string str() const;
  /// Indented form for files people read.
  std::string pretty(int indent = 2) const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace pipelab::json
