#include "core/experiment/input_paths.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace pipelab {
namespace {

/// The scalar at `path` ("dataset.path") when every section on the way is a map. yaml-cpp's
/// Node assignment writes through to the tree, so the walk rebinds with reset().
YAML::Node scalar_at(const YAML::Node& root, const std::string& path) {
  YAML::Node node;
  node.reset(root);
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const YAML::Node& here = node;
    if (!here.IsMap() || !here[key]) return YAML::Node(YAML::NodeType::Undefined);
    node.reset(here[key]);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return node.IsScalar() ? node : YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace

const std::vector<std::string>& input_path_keys() {
  static const std::vector<std::string> keys{"dataset.path", "dataset.test_path", "dataset.vocab", "dataset.merges",
                                             "model.file",   "scheme.file",       "init.from",     "run.data_dir"};
  return keys;
}

void resolve_input_paths(YAML::Node& root, const ConfigSource& source) {
  std::error_code error;
  if (source.file().empty() || !fs::is_regular_file(source.file(), error)) return;
  const fs::path folder = fs::path(source.file()).parent_path();
  if (folder.empty()) return;  // the file is in the current directory: nothing to join
  const auto resolve = [&](YAML::Node node) {
    const fs::path value(node.Scalar());
    if (!value.empty() && !value.is_absolute()) node = (folder / value).lexically_normal().string();
  };
  // A value from the command line ("--set key=value") is the shell's; one a sweep's grid
  // set (its place in the file) is the file's, like the rest of it.
  const auto from_file = [&](const std::string& key) { return source.override_for(key).rfind("--set ", 0) != 0; };
  for (const std::string& key : input_path_keys()) {
    YAML::Node node = scalar_at(root, key);
    if (node.IsDefined() && from_file(key)) resolve(node);
  }
  // `plugins:` lists shared libraries to load (core/config/plugins.h).
  if (root.IsMap() && root["plugins"] && from_file("plugins")) {
    YAML::Node list = root["plugins"];
    if (list.IsScalar()) resolve(list);
    for (size_t i = 0; list.IsSequence() && i < list.size(); ++i) {
      if (list[i].IsScalar()) resolve(list[i]);
    }
  }
}

void rebase_input_paths(YAML::Node& root, const std::string& from, const std::string& to) {
  const fs::path source = fs::absolute(from).lexically_normal(), target = fs::absolute(to).lexically_normal();
  if (source == target) return;
  for (const std::string& key : input_path_keys()) {
    YAML::Node node = scalar_at(root, key);
    if (!node.IsDefined()) continue;
    const fs::path value(node.Scalar());
    if (value.empty() || value.is_absolute()) continue;
    node = (source / value).lexically_normal().lexically_relative(target).string();
  }
}

std::vector<std::string> missing_input_paths(const YAML::Node& root) {
  std::vector<std::string> out;
  for (const std::string& key : input_path_keys()) {
    const YAML::Node node = scalar_at(root, key);
    std::error_code error;
    if (node.IsDefined() && !node.Scalar().empty() && !fs::exists(node.Scalar(), error)) {
      out.push_back(key + ": " + node.Scalar());
    }
  }
  return out;
}

}  // namespace pipelab
