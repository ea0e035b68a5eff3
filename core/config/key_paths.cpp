#include "core/config/key_paths.h"

namespace pipelab {

std::vector<std::string> split_key_path(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    out.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (out.back().empty()) return {};
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

bool paths_overlap(const std::string& a, const std::string& b) {
  const auto inside = [](const std::string& outer, const std::string& inner) {
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '.';
  };
  return a == b || inside(a, b) || inside(b, a);
}

YAML::Node find_path(const YAML::Node& root, const std::string& path) {
  // yaml-cpp's operator[] on a const node never inserts; Node copies share data, so the
  // cursor is re-seated with reset() rather than assigned.
  YAML::Node cursor;
  cursor.reset(root);
  for (const std::string& key : split_key_path(path)) {
    if (!cursor.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node next = static_cast<const YAML::Node&>(cursor)[key];
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    cursor.reset(next);
  }
  return cursor;
}

void set_path(YAML::Node& root, const std::string& path, const YAML::Node& value) {
  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  const std::vector<std::string> keys = split_key_path(path);
  YAML::Node cursor;
  cursor.reset(root);
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node next;
    next.reset(cursor[keys[i]]);
    if (!next.IsMap()) {
      cursor[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cursor[keys[i]]);
    }
    cursor.reset(next);
  }
  // A copy: assigning a node shares its data, and later edits of this tree must not reach
  // the value's origin (the sweep section, or another cell).
  cursor[keys.back()] = YAML::Clone(value);
}

}  // namespace pipelab
