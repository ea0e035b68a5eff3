#pragma once
/// Name -> factory registries for schemes, models, datasets, optimizers, LR schedules and
/// executors. A plugin registers itself with one line in its own .cpp:
///
///   PIPELAB_REGISTER(Scheme, GpipeScheme, "gpipe", "GPipe fill-drain with micro-batches");
///
/// and is created from a `{type: gpipe, ...options}` section. No central switch, no enum.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/config/plugins.h"

namespace pipelab {

/// Base of every registered component: knows its registered name and its resolved options.
class Component {
 public:
  virtual ~Component() = default;
  /// The registered name (`type:` in YAML).
  const std::string& type() const { return type_; }
  /// The options after defaults were applied, without `type`.
  virtual YAML::Node resolved_options() const = 0;
  /// `{type: name, ...resolved options}`, as written to a run's config.yaml.
  YAML::Node resolved() const;
  void set_type(std::string t) { type_ = std::move(t); }
  /// Where the component's section was read (set by the registry).
  void set_origin(std::shared_ptr<const ConfigSource> source, std::string path);
  /// A ConfigError at option `key` of this component's section, for problems found after
  /// parsing (e.g. an MLP whose input size does not match the dataset).
  [[noreturn]] void fail(const std::string& key, const std::string& problem, const std::string& fix) const;

 private:
  std::string type_;
  std::shared_ptr<const ConfigSource> source_;
  std::string path_;
};

/// The option keys of type `type` of the component kind `kind` ("scheme", "model"), from its
/// registry; nullopt for a kind or type not registered. A --set that changes a section's type
/// keeps only these (apply_overrides, core/config/config_node.h).
std::optional<std::vector<std::string>> kind_option_keys(const std::string& kind, const std::string& type);
/// Makes kind_option_keys answer for `kind` (each registry does, once, when first made).
void add_kind_options(const std::string& kind,
                      std::function<std::optional<std::vector<std::string>>(const std::string&)> keys);

/// Stores a component's options struct and emits it.
template <class Base, class O>
class Configured : public Base {
 public:
  using Options = O;
  explicit Configured(O options) : options_(std::move(options)) {}
  const O& options() const { return options_; }
  YAML::Node resolved_options() const override { return write_options(options_); }

 protected:
  O options_;
};

/// The registry of one component kind. `Base::kKind` names the kind in messages.
template <class Base>
class Registry {
 public:
  using Creator = std::function<std::unique_ptr<Base>(const ConfigNode&)>;
  struct Entry {
    std::string name;
    std::string description;
    Creator create;
    std::function<std::vector<FieldInfo>()> options;
  };

  static Registry& get() {
    static Registry registry;
    return registry;
  }
  Registry() {
    add_kind_options(Base::kKind, [](const std::string& type) -> std::optional<std::vector<std::string>> {
      const Entry* entry = Registry::get().find(type);
      if (!entry || !entry->options) return std::nullopt;
      std::vector<std::string> keys;
      for (const FieldInfo& f : entry->options()) keys.push_back(f.key.substr(0, f.key.find('.')));
      return keys;
    });
  }

  /// Adds `entry`; a name already taken keeps its first entry and is noted as a conflict
  /// (registration_conflicts()), not thrown: registrations run while a plugin's library is
  /// being loaded, where no exception may unwind through the loader.
  bool add(Entry entry) {
    if (entries_.count(entry.name)) {
      note_registration_conflict(fmt::format("{} '{}'", Base::kKind, entry.name));
      return false;
    }
    entries_.emplace(entry.name, std::move(entry));
    return true;
  }

  const Entry* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }

  /// Registered names, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }

  const std::map<std::string, Entry>& entries() const { return entries_; }

  /// The entry for `name`; an unknown name is a UserError listing the valid names.
  const Entry& at(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    throw UserError(unknown_name_message(Base::kKind, name, names()));
  }

  /// Creates a component from `{type: name, ...}`; errors name the place and the fix.
  std::unique_ptr<Base> create(const ConfigNode& section) const {
    section.expect_map(fmt::format("a {} section with a 'type'", Base::kKind));
    if (!section.has("type")) {
      section.fail(fmt::format("missing 'type' of the {}", Base::kKind),
                   fmt::format("add `type: <name>` with one of: {}", join(names(), ", ")));
    }
    const ConfigNode type_node = section.child("type");
    const std::string name = ConfigValue<std::string>::read(type_node);
    const Entry* entry = find(name);
    if (!entry) {
      type_node.fail(unknown_name_message(Base::kKind, name, names()),
                     fmt::format("use one of: {}", join(closest_first(name, names()), ", ")));
    }
    std::unique_ptr<Base> made = entry->create(section);
    made->set_type(name);
    made->set_origin(section.source(), section.path());
    return made;
  }

  /// Creates `name` with its default options (used by `pipelab schedule` and tests).
  std::unique_ptr<Base> create_default(const std::string& name) const {
    auto source = std::make_shared<ConfigSource>("<defaults>");
    YAML::Node node(YAML::NodeType::Map);
    node["type"] = name;
    at(name);
    return create(ConfigNode(node, source, Base::kKind));
  }

 private:
  std::map<std::string, Entry> entries_;
};

/// Registers Impl (constructible from Impl::Options) under `name`.
template <class Base, class Impl>
bool register_component(const char* name, const char* description) {
  return Registry<Base>::get().add(
      {name, description,
       [](const ConfigNode& node) -> std::unique_ptr<Base> {
         return std::make_unique<Impl>(read_options<typename Impl::Options>(node, {"type"}));
       },
       [] { return document_options<typename Impl::Options>(); }});
}

}  // namespace pipelab

#define PIPELAB_CONCAT_INNER(a, b) a##b
#define PIPELAB_CONCAT(a, b) PIPELAB_CONCAT_INNER(a, b)
/// One registration line per plugin, in the plugin's own .cpp. (__COUNTER__, not __LINE__:
/// the unity build compiles several plugins' .cpp files as one translation unit.)
#define PIPELAB_REGISTER(Base, Impl, name, description)                           \
  [[maybe_unused]] static const bool PIPELAB_CONCAT(pipelab_registered_, __COUNTER__) = \
      ::pipelab::register_component<Base, Impl>(name, description)
