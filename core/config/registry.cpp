#include "core/config/registry.h"

namespace pipelab {
namespace {

using KindKeys = std::function<std::optional<std::vector<std::string>>(const std::string&)>;

std::map<std::string, KindKeys>& kind_keys_table() {
  static std::map<std::string, KindKeys> table;
  return table;
}

}  // namespace

void add_kind_options(const std::string& kind, KindKeys keys) { kind_keys_table()[kind] = std::move(keys); }

std::optional<std::vector<std::string>> kind_option_keys(const std::string& kind, const std::string& type) {
  const auto it = kind_keys_table().find(kind);
  return it == kind_keys_table().end() ? std::nullopt : it->second(type);
}

YAML::Node Component::resolved() const {
  YAML::Node out(YAML::NodeType::Map);
  out["type"] = type_;
  for (const auto& kv : resolved_options()) out[kv.first.Scalar()] = kv.second;
  return out;
}

void Component::set_origin(std::shared_ptr<const ConfigSource> source, std::string path) {
  source_ = std::move(source);
  path_ = std::move(path);
}

void Component::fail(const std::string& key, const std::string& problem, const std::string& fix) const {
  const std::string path = key.empty() ? path_ : path_.empty() ? key : path_ + "." + key;
  if (source_) source_->fail(path, problem, fix);
  throw ConfigError(fmt::format("{}: {}. Fix: {}.", path, problem, fix));
}

}  // namespace pipelab
