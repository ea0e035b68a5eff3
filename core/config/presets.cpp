#include "core/config/presets.h"

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config/key_paths.h"
#include "core/util/names.h"

namespace pipelab {
namespace {

/// A copy of the node at the dotted `path` of `root` (later edits of the tree must not reach
/// it), or an undefined node.
YAML::Node copy_at(const YAML::Node& root, const std::string& path) {
  const YAML::Node n = find_path(root, path);
  return n.IsDefined() ? YAML::Clone(n) : n;
}

/// Checks `presets:` and its entries: a mapping of names to mappings of key paths.
void check_presets(const ConfigNode& presets) {
  presets.expect_map("preset names, each with its settings: {cpu-mini: {run.epochs: 1}}");
  for (const std::string& name : presets.keys()) {
    const ConfigNode preset = presets.child(name);
    if (!preset.is_map()) {
      preset.fail("a preset is a mapping of settings",
                  "write it as `" + name + ": {key.path: value, ...}`, the key paths that --set takes");
    }
    for (const std::string& key : preset.keys()) {
      const std::string top = key.substr(0, key.find('.'));
      if (top == "preset" || top == "presets") {
        throw ConfigError(fmt::format("{}: {}.{}: a preset cannot choose or define presets. Fix: remove the entry.",
                                      preset.where_key(key), preset.path(), key));
      }
    }
  }
}

/// The name `preset:` chooses; a ConfigError unless `presets` has it.
std::string chosen_preset(const ConfigNode& top) {
  const ConfigNode choice = top.child("preset");
  const std::string name = choice.text();
  if (!top.has("presets")) {
    choice.fail(fmt::format("the file has no presets: section, so there is no preset '{}'", name),
                fmt::format("drop it, or add `presets: {{{}: {{run.epochs: 1}}}}` to the file", name));
  }
  const std::vector<std::string> names = top.child("presets").keys();
  if (name.empty() || !top.child("presets").has(name)) {
    choice.fail(fmt::format("the file has no preset '{}'", name.empty() ? "(not a name)" : name),
                "use one of: " + join(name.empty() ? names : closest_first(name, names), ", "));
  }
  return name;
}

}  // namespace

void apply_preset(YAML::Node& root, ConfigSource& source) {
  if (!root.IsMap()) return;
  // A view for messages: `source` outlives this call.
  const std::shared_ptr<const ConfigSource> view(&source, [](const ConfigSource*) {});
  const ConfigNode top(root, view, "");
  if (top.has("presets")) check_presets(top.child("presets"));
  if (top.has("preset")) {
    const std::string name = chosen_preset(top);
    const ConfigNode preset = top.child("presets").child(name);
    const std::vector<std::string> paths = preset.keys();
    // The user's --set of a path itself, or of a section above it, wins (asked before the
    // preset's own settings are recorded as overrides too).
    std::vector<std::string> users;
    for (const std::string& path : paths) users.push_back(source.override_for(path));
    for (size_t i = 0; i < paths.size(); ++i) {
      const std::string& path = paths[i];
      const std::string& user = users[i];
      if (!user.empty()) {
        // The user's value, as it stands, is what a sweep's cells keep.
        source.add_preset_setting({path, copy_at(root, path), user});
        continue;
      }
      // The preset's value, then the user's --set values under it again: the user's keys
      // win, the preset's others stay (a preset's optimizer with --set optimizer.lr).
      const std::string where = fmt::format("{} (preset {})", preset.where_key(path), name);
      set_key_path(root, path, YAML::Clone(preset.child(path).yaml()), where, source.file());
      source.add_override(path, where);
      for (const ConfigSource::Setting& s : source.settings_under(path)) {
        set_key_path(root, s.path, YAML::Clone(s.value), s.text, source.file());
        source.add_override(s.path, s.text);
      }
      source.add_preset_setting({path, copy_at(root, path), where});
    }
  }
  root.remove("preset");
  root.remove("presets");
}

}  // namespace pipelab
