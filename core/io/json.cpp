#include "core/io/json.h"

#include <fmt/format.h>

#include <cmath>

namespace pipelab::json {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

Object& Object::add(const std::string& key, double v) {
  fields_.emplace_back(key, number(v));
  return *this;
}
Object& Object::add(const std::string& key, int64_t v) {
  fields_.emplace_back(key, std::to_string(v));
  return *this;
}
Object& Object::add(const std::string& key, bool v) {
  fields_.emplace_back(key, v ? "true" : "false");
  return *this;
}
Object& Object::add(const std::string& key, const std::string& v) {
  fields_.emplace_back(key, quote(v));
  return *this;
}
Object& Object::add(const std::string& key, const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number(v[i]);
  fields_.emplace_back(key, s + "]");
  return *this;
}
Object& Object::add_raw(const std::string& key, const std::string& raw) {
  fields_.emplace_back(key, raw);
  return *this;
}

std::string Object::str() const {
  std::string s = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    s += (i ? ", " : "") + quote(fields_[i].first) + ": " + fields_[i].second;
  }
  return s + "}";
}

std::string Object::pretty(int indent) const {
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string s = "{\n";
  for (size_t i = 0; i < fields_.size(); ++i) {
    std::string value = fields_[i].second;
    // Indent nested multi-line objects one level further.
    for (size_t p = value.find('\n'); p != std::string::npos; p = value.find('\n', p + 1)) {
      value.insert(p + 1, pad);
    }
    s += pad + quote(fields_[i].first) + ": " + value + (i + 1 < fields_.size() ? ",\n" : "\n");
  }
  return s + "}";
}

}  // namespace pipelab::json
