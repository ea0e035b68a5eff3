#include "core/config/fields.h"

namespace pipelab {

void FieldReader::finish() const {
  for (const std::string& key : node_.keys()) {
    if (known_.count(key)) continue;
    std::vector<std::string> valid(known_.begin(), known_.end());
    valid.erase(std::remove(valid.begin(), valid.end(), "type"), valid.end());
    const std::string section = node_.path().empty() ? "the top level" : "'" + node_.path() + "'";
    throw ConfigError(fmt::format(
        "{}: {}: unknown key '{}' in {}. Fix: {}.", node_.where_key(key), node_.child_path(key), key,
        section,
        valid.empty() ? std::string("remove it")
                      : fmt::format("remove it or use one of: {}", join(closest_first(key, valid), ", "))));
  }
}

}  // namespace pipelab
