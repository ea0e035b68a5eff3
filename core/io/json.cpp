#include "core/io/json.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"

namespace pipelab::json {

using ordered = nlohmann::ordered_json;

struct Object::Impl {
  ordered value = ordered::object();
};

namespace {

ordered number_value(double v) { return std::isfinite(v) ? ordered(v) : ordered(nullptr); }

}  // namespace

std::string number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

Object::Object() : impl_(std::make_unique<Impl>()) {}
Object::~Object() = default;
Object::Object(const Object& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Object& Object::operator=(const Object& other) {
  *impl_ = *other.impl_;
  return *this;
}

#define PIPELAB_JSON_SET(key, expr)                                                              \
  do {                                                                                           \
    PIPELAB_ASSERT(!impl_->value.contains(key), "JSON key '{}' added twice", key);              \
    impl_->value[key] = (expr);                                                                  \
    return *this;                                                                                \
  } while (false)

Object& Object::add(const std::string& key, double v) { PIPELAB_JSON_SET(key, number_value(v)); }
Object& Object::add(const std::string& key, int64_t v) { PIPELAB_JSON_SET(key, v); }
Object& Object::add(const std::string& key, bool v) { PIPELAB_JSON_SET(key, v); }
Object& Object::add(const std::string& key, const std::string& v) { PIPELAB_JSON_SET(key, v); }
Object& Object::add(const std::string& key, const std::vector<int64_t>& v) { PIPELAB_JSON_SET(key, v); }
Object& Object::add(const std::string& key, const Object& v) { PIPELAB_JSON_SET(key, v.impl_->value); }

Object& Object::add(const std::string& key, const std::vector<double>& v) {
  ordered a = ordered::array();
  for (const double x : v) a.push_back(number_value(x));
  PIPELAB_JSON_SET(key, std::move(a));
}

Object& Object::add(const std::string& key, const std::vector<Object>& v) {
  ordered a = ordered::array();
  for (const Object& x : v) a.push_back(x.impl_->value);
  PIPELAB_JSON_SET(key, std::move(a));
}

#undef PIPELAB_JSON_SET

std::string Object::str() const { return impl_->value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string Object::pretty(int indent) const {
  return impl_->value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pipelab::json
