#pragma once
/// JSON for metrics lines and summaries, written through nlohmann-json (Debian's
/// nlohmann-json3-dev) and read back by Python's `json`. Keys keep their insertion order;
/// a key added twice is a bug (an assertion), never a silently shadowed value. Numbers
/// print in their shortest round-trip form, so identical runs write identical bytes;
/// non-finite numbers become null.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pipelab::json {

/// A JSON number in its shortest round-trip form ("null" for NaN and infinities), for
/// CSV fields that must read back exactly.
std::string number(double v);

/// Builds one JSON object.
class Object {
 public:
  Object();
  ~Object();
  Object(const Object& other);
  Object& operator=(const Object& other);

  Object& add(const std::string& key, double v);
  Object& add(const std::string& key, int64_t v);
  Object& add(const std::string& key, int v) { return add(key, static_cast<int64_t>(v)); }
  Object& add(const std::string& key, bool v);
  Object& add(const std::string& key, const std::string& v);
  Object& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  Object& add(const std::string& key, const std::vector<double>& v);
  Object& add(const std::string& key, const std::vector<int64_t>& v);
  Object& add(const std::string& key, const Object& v);
  Object& add(const std::string& key, const std::vector<Object>& v);
  /// Compact single-line form.
  std::string str() const;
  /// Indented form for files people read.
  std::string pretty(int indent = 2) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipelab::json
