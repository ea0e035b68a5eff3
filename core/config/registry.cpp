#include "core/config/registry.h"

namespace pipelab {

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
