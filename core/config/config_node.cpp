#include "core/config/config_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/config/key_paths.h"
#include "core/config/presets.h"
#include "core/config/registry.h"
#include "core/config/yaml_file.h"
#include "core/util/names.h"

namespace pipelab {

void ConfigSource::add_override(const std::string& path, const std::string& text, const YAML::Node& value) {
  overrides_[path] = text;
  if (value.IsDefined()) settings_.push_back({path, YAML::Clone(value), text});
}

std::vector<ConfigSource::Setting> ConfigSource::settings_under(const std::string& path) const {
  std::vector<Setting> out;
  for (const Setting& s : settings_) {
    if (s.path.rfind(path + ".", 0) == 0) out.push_back(s);
  }
  return out;
}

std::string ConfigSource::override_for(const std::string& path) const {
  // The longest overridden prefix of `path` ("a.b" covers "a.b" and "a.b.c").
  for (std::string p = path;;) {
    auto it = overrides_.find(p);
    if (it != overrides_.end()) return it->second;
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) return {};
    p.resize(dot);
  }
}

std::string ConfigSource::override_within(const std::string& path) const {
  for (const auto& [p, text] : overrides_) {
    if (p == path || p.rfind(path + ".", 0) == 0) return text;
  }
  return override_for(path);
}

void ConfigSource::remember(const std::string& path, const std::string& where) const {
  where_[path] = where;
}

std::string ConfigSource::where(const std::string& path) const {
  const std::string over = override_for(path);
  if (!over.empty()) return over;
  auto it = where_.find(path);
  return it != where_.end() ? it->second : file_;
}

void ConfigSource::fail(const std::string& path, const std::string& problem,
                        const std::string& fix) const {
  throw ConfigError(fmt::format("{}: {}: {}. Fix: {}.", where(path), path.empty() ? "(top level)" : path,
                                problem, fix));
}

std::string format_mark(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return file;
  return fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
}

ConfigNode::ConfigNode(YAML::Node node, std::shared_ptr<const ConfigSource> source,
                       std::string path)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)) {
  source_->remember(path_, where());
}

std::string ConfigNode::child_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool ConfigNode::has(const std::string& key) const {
  return node_.IsMap() && node_[key].IsDefined();
}

ConfigNode ConfigNode::child(const std::string& key) const {
  PIPELAB_ASSERT(has(key), "missing key {}", child_path(key));
  return ConfigNode(node_[key], source_, child_path(key));
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& kv : node_) {
    // A key that is not a plain name (`null` or `~`, or YAML's `? [a, b]` complex keys)
    // could never be looked up again by its text.
    if (!kv.first.IsScalar()) {
      throw ConfigError(fmt::format("{}: {}: a key that is {}, not a name. Fix: {}",
                                    format_mark(source_->file(), kv.first.Mark()), path_.empty() ? "(top level)" : path_,
                                    kv.first.IsNull() ? "null (written null or ~)" : "a list or a mapping",
                                    kv.first.IsNull() ? "quote it ('null') if that is the name you mean, or remove it"
                                                      : "write the key as a plain name"));
    }
    out.push_back(kv.first.as<std::string>());
  }
  return out;
}

std::string ConfigNode::where() const {
  const std::string over = source_->override_for(path_);
  if (!over.empty()) return over;
  return format_mark(source_->file(), node_.Mark());
}

std::string ConfigNode::where_key(const std::string& key) const {
  const std::string over = source_->override_for(child_path(key));
  if (!over.empty()) return over;
  if (node_.IsMap()) {
    for (const auto& kv : node_) {
      if (kv.first.Scalar() != key) continue;
      // A key no file wrote was made by a setting deeper down (--set a.b.c=1, or a preset's
      // a.b.c): that setting is where it comes from.
      if (kv.first.Mark().is_null()) {
        const std::string within = source_->override_within(child_path(key));
        if (!within.empty()) return within;
      }
      return format_mark(source_->file(), kv.first.Mark());
    }
  }
  return where();
}

void ConfigNode::fail(const std::string& problem, const std::string& fix) const {
  throw ConfigError(fmt::format("{}: {}: {}. Fix: {}.", where(),
                                path_.empty() ? "(top level)" : path_, problem, fix));
}

std::string ConfigNode::text() const { return node_.IsScalar() ? node_.Scalar() : std::string(); }

void ConfigNode::expect_map(const std::string& what) const {
  if (!node_.IsDefined() || node_.IsNull() || node_.IsMap()) return;
  fail(fmt::format("expected a mapping ({}), got {}", what,
                   node_.IsSequence() ? "a list" : "'" + node_.Scalar() + "'"),
       fmt::format("write {} as `key: value` lines or {{key: value, ...}}",
                   path_.empty() ? "the file" : path_));
}

void set_key_path(YAML::Node& root, const std::string& path, const YAML::Node& value, const std::string& text,
                  const std::string& file) {
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    throw ConfigError(fmt::format("{}: the file's top level is {}, not sections such as model: and run:. Fix: "
                                  "write the experiment as `section: {{key: value}}` lines.",
                                  file, root.IsSequence() ? "a list" : "a single value"));
  }
  const std::vector<std::string> keys = split_key_path(path);
  if (keys.empty()) {
    throw ConfigError(fmt::format("{}: empty key in '{}'. Fix: write key paths like run.epochs.", text, path));
  }
  YAML::Node cursor = root;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!cursor.IsMap()) {
      const std::vector<std::string> above(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(i));
      throw ConfigError(fmt::format("{}: '{}' is not a section, so '{}' cannot be set inside it. Fix: check the key path.",
                                    text, join(above, "."), keys[i]));
    }
    if (i + 1 == keys.size()) {
      cursor[keys[i]] = value;
      break;
    }
    YAML::Node next = cursor[keys[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cursor[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next = cursor[keys[i]];
    }
    cursor.reset(next);
  }
}

namespace {

/// A --set of `scheme.type` or `model.type` to another type makes a new section: the keys the
/// file gave the old type that the new one does not take go (each component reads its own
/// options, and would refuse them), said in a note; the others, and the earlier --set values,
/// stay.
void replace_section_type(YAML::Node& root, const std::string& path, const YAML::Node& value, const std::string& text,
                          ConfigSource& source) {
  const std::vector<std::string> keys = split_key_path(path);
  if (keys.size() != 2 || keys[1] != "type" || (keys[0] != "scheme" && keys[0] != "model") || !value.IsScalar() ||
      !root.IsMap()) {
    return;
  }
  YAML::Node section = root[keys[0]];
  if (!section.IsMap() || !section["type"] || !section["type"].IsScalar() || section["type"].Scalar() == value.Scalar()) {
    return;
  }
  const std::optional<std::vector<std::string>> taken = kind_option_keys(keys[0], value.Scalar());
  if (!taken) return;  // an unknown type: its own error names it
  std::vector<std::string> dropped;
  for (const auto& kv : section) {
    const std::string k = kv.first.Scalar();
    if (k == "type" || std::find(taken->begin(), taken->end(), k) != taken->end()) continue;
    if (!source.override_for(keys[0] + "." + k).empty()) continue;  // the user's own --set
    dropped.push_back(k);
  }
  for (const std::string& k : dropped) section.remove(k);
  if (!dropped.empty()) {
    source.add_note(fmt::format("{}: the {} section is now {}'s: dropped {} (the file's {} options it does not take)",
                                text, keys[0], value.Scalar(), join(dropped, ", "), section["type"].Scalar()));
  }
}

}  // namespace

void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                     ConfigSource& source) {
  for (const std::string& item : overrides) {
    // `--preset NAME` reaches here as preset=NAME (tools/cli/options.h): name it as typed.
    const std::string text = item.rfind("preset=", 0) == 0 ? "--preset " + item.substr(7) : "--set " + item;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError(fmt::format("{}: expected key.path=value. Fix: write e.g. --set optimizer.lr=0.05.", text));
    }
    const std::string path = item.substr(0, eq);
    YAML::Node value;
    try {
      value = parse_yaml(item.substr(eq + 1), text);
    } catch (const ConfigError& e) {
      // parse_yaml names the place as "SOURCE:line:column: what. Fix: ..."; a flag has one
      // line, so keep only what went wrong and give the fix for a flag.
      std::string what = e.what();
      const size_t colon = what.find(": ", text.size());
      if (colon != std::string::npos) what = what.substr(colon + 2);
      const size_t fix = what.find(". Fix:");
      if (fix != std::string::npos) what = what.substr(0, fix);
      throw ConfigError(fmt::format("{}: the value is not valid YAML ({}). Fix: quote it, or use [a, b] for lists.",
                                    text, what));
    }
    replace_section_type(root, path, value, text, source);
    set_key_path(root, path, value, text, source.file());
    source.add_override(path, text, value);
  }
  apply_preset(root, source);
}

}  // namespace pipelab
