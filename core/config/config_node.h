#pragma once
/// A YAML node that knows where it came from (file, line:column, key path, or a --set
/// override), so every configuration error names the place and the fix
/// (docs/contributing.md, habit 4).
#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/util/error.h"

namespace pipelab {

/// A configuration mistake: the message names the place, the key path and the fix.
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};

/// The origin of a configuration tree: the file, and the key paths that --set replaced.
class ConfigSource {
 public:
  explicit ConfigSource(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }
  /// Records that `path` was set on the command line as `text` ("--set a.b=1"), to `value`
  /// when given (what a preset applied later sets again under its own entry).
  void add_override(const std::string& path, const std::string& text, const YAML::Node& value = YAML::Node());
  /// A --set value as given: its key path, value and text.
  struct Setting {
    std::string path;
    YAML::Node value;
    std::string text;
  };
  /// The --set values strictly under `path` ("a" finds "a.b" and "a.b.c"), in the order given.
  std::vector<Setting> settings_under(const std::string& path) const;
  /// "--set a.b=1" if `path` or one of its parents was overridden, else empty.
  std::string override_for(const std::string& path) const;
  /// "--set a.b.c=1" for the first override at `path` or under it ("a.b" finds "a.b.c"), else empty.
  std::string override_within(const std::string& path) const;
  /// A preset's setting as applied to the file: a sweep applies these to every cell again,
  /// last, so a miniature holds whatever the cell's own include or override entries say.
  struct PresetSetting {
    std::string path;
    YAML::Node value;
    std::string where;  ///< the preset's line, or the user's --set where it gave the path
  };
  void add_preset_setting(PresetSetting setting) { preset_settings_.push_back(std::move(setting)); }
  const std::vector<PresetSetting>& preset_settings() const { return preset_settings_; }
  /// What applying the overrides changed beyond the values given (the keys a --set of a
  /// section's type dropped), for the command to say.
  void add_note(std::string note) { notes_.push_back(std::move(note)); }
  const std::vector<std::string>& notes() const { return notes_; }
  /// Remembers where a key was read, for errors found after parsing (e.g. a bad balance).
  void remember(const std::string& path, const std::string& where) const;
  /// Where `path` was read ("file:line:col"), or the file name if unknown.
  std::string where(const std::string& path) const;
  /// Throws ConfigError "<where>: <path>: <problem>. Fix: <fix>".
  [[noreturn]] void fail(const std::string& path, const std::string& problem,
                         const std::string& fix) const;

 private:
  std::string file_;
  std::map<std::string, std::string> overrides_;
  std::vector<Setting> settings_;
  std::vector<PresetSetting> preset_settings_;
  std::vector<std::string> notes_;
  mutable std::map<std::string, std::string> where_;
};

/// One node of a configuration tree, with its key path and source.
class ConfigNode {
 public:
  ConfigNode(YAML::Node node, std::shared_ptr<const ConfigSource> source, std::string path);

  const YAML::Node& yaml() const { return node_; }
  const std::string& path() const { return path_; }
  const std::shared_ptr<const ConfigSource>& source() const { return source_; }
  /// "a.b" for key "b" of node "a".
  std::string child_path(const std::string& key) const;
  bool is_map() const { return node_.IsMap(); }
  bool has(const std::string& key) const;
  /// The child at `key`; call has() first.
  ConfigNode child(const std::string& key) const;
  /// Keys of a map node in file order.
  std::vector<std::string> keys() const;
  /// "file.yaml:3:5", or "--set key=value" for overridden values.
  std::string where() const;
  /// Where the key `key` itself is written (for unknown-key errors).
  std::string where_key(const std::string& key) const;
  /// Throws a ConfigError for this node.
  [[noreturn]] void fail(const std::string& problem, const std::string& fix) const;
  /// The scalar text of the node ("" for non-scalars).
  std::string text() const;
  /// Fails unless the node is a map (an empty or missing section counts as an empty map).
  void expect_map(const std::string& what) const;

 private:
  YAML::Node node_;
  std::shared_ptr<const ConfigSource> source_;
  std::string path_;
};

/// Formats the location of a yaml-cpp mark as "file:line:col" (1-based).
std::string format_mark(const std::string& file, const YAML::Mark& mark);

/// Sets `value` at the dotted `path` of `root`, making the sections on the way; `text` names
/// the setting in errors (a path through a non-section), `file` the file whose top level it is.
void set_key_path(YAML::Node& root, const std::string& path, const YAML::Node& value, const std::string& text,
                  const std::string& file);

/// Applies "key.path=value" overrides to `root` (value parsed as YAML) and records them in
/// `source`, then the preset the tree selects (core/config/presets.h). A malformed override is
/// a ConfigError.
void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                     ConfigSource& source);

}  // namespace pipelab
