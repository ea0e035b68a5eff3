#include "tools/sweep/sweep_spec.h"

#include <filesystem>

#include "core/config/yaml_file.h"
#include "core/io/input_file.h"
#include "tools/sweep/key_paths.h"

namespace pipelab {

tools::KeyValues ConfigValue<tools::KeyValues>::read(const ConfigNode& n) {
  n.expect_map(type());
  tools::KeyValues out;
  for (const std::string& key : n.keys()) {
    const auto fail_key = [&](const std::string& problem, const std::string& fix) {
      throw ConfigError(fmt::format("{}: {}: {}. Fix: {}.", n.where_key(key), n.child_path(key), problem, fix));
    };
    const std::vector<std::string> segments = tools::split_key_path(key);
    if (segments.empty()) {
      fail_key(fmt::format("'{}' is not a key path", key), "write key paths like scheme.chunks (no empty parts)");
    }
    if (segments.front() == "sweep") {
      fail_key("a sweep cannot vary its own settings", "vary keys of the experiment, like optimizer.lr");
    }
    if (key == "run.output" || key.rfind("run.output.", 0) == 0) {
      fail_key("the sweep sets each cell's run.output (<sweep.output>/<run id>)",
               "set sweep.output for the folder of the whole sweep");
    }
    out.items.push_back({key, n.child(key)});
  }
  return out;
}

YAML::Node ConfigValue<tools::KeyValues>::write(const tools::KeyValues& v) {
  YAML::Node out(YAML::NodeType::Map);
  for (const tools::KeyValue& kv : v.items) out[kv.key] = kv.value.yaml();
  out.SetStyle(YAML::EmitterStyle::Flow);
  return out;
}

}  // namespace pipelab

namespace pipelab::tools {
namespace {

void check_no_overlap(const KeyValues& kvs, const std::string& what) {
  for (size_t i = 0; i < kvs.items.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (paths_overlap(kvs.items[i].key, kvs.items[j].key)) {
        kvs.items[i].value.fail(
            fmt::format("'{}' overlaps '{}' in the same {}", kvs.items[i].key, kvs.items[j].key, what),
            "set a section whole or its keys one by one, not both");
      }
    }
  }
}

/// Entry `i` of the list at `key` of `node` (for messages about one entry).
ConfigNode entry(const ConfigNode& node, const std::string& key, size_t i) {
  const ConfigNode list = node.child(key);
  return ConfigNode(list.yaml()[i], list.source(), fmt::format("{}[{}]", list.path(), i));
}

void check_not_empty(const KeyValues& kvs, const ConfigNode& where, const std::string& what) {
  if (kvs.empty())
    where.fail(fmt::format("an empty {} matches or sets nothing", what), "give it key: value entries or remove it");
}

}  // namespace

void SweepOptions::check(const ConfigNode& node) const {
  for (const KeyValue& axis : grid.items) {
    const YAML::Node& values = axis.value.yaml();
    if (!values.IsSequence() || values.size() == 0) {
      axis.value.fail(values.IsSequence() ? "an empty list gives no cells"
                                          : "expected a list of the values to try, got a single value",
                      fmt::format("write sweep.grid.{}: [value1, value2] (one value: [value])", axis.key));
    }
  }
  check_no_overlap(grid, "grid");
  for (size_t i = 0; i < include.size(); ++i) {
    check_not_empty(include[i], entry(node, "include", i), "include entry");
    check_no_overlap(include[i], "include entry");
  }
  for (size_t i = 0; i < exclude.size(); ++i) check_not_empty(exclude[i], entry(node, "exclude", i), "exclude entry");
  for (size_t i = 0; i < overrides.size(); ++i) {
    check_not_empty(overrides[i].match, entry(node, "overrides", i), "match");
    check_not_empty(overrides[i].set, entry(node, "overrides", i), "set");
    check_no_overlap(overrides[i].set, "set");
  }
  if (grid.empty() && include.empty()) {
    node.fail("the sweep has no cells", "add grid: {key.path: [value1, value2]} or include: [{key.path: value}]");
  }
}

SweepDocument SweepDocument::load(const std::string& file, const std::vector<std::string>& overrides) {
  return parse(read_file(file, 64u << 20), file, overrides);
}

SweepDocument SweepDocument::parse(const std::string& yaml, const std::string& file,
                                   const std::vector<std::string>& overrides) {
  SweepDocument doc;
  doc.source = std::make_shared<ConfigSource>(file);
  doc.name = std::filesystem::path(file).stem().string();
  doc.text = yaml;
  doc.overrides = overrides;
  doc.root = parse_yaml(yaml, file);
  apply_overrides(doc.root, overrides, *doc.source);
  const ConfigNode top(doc.root, doc.source, "");
  top.expect_map("an experiment with a sweep section");
  if (!top.has("sweep")) {
    top.fail("no 'sweep' section",
             "add `sweep: {grid: {key.path: [value1, value2]}}`, or train one experiment with `pipelab run`");
  }
  return doc;
}

ConfigNode SweepDocument::section() const { return ConfigNode(root, source, "").child("sweep"); }

SweepOptions read_sweep_options(const SweepDocument& doc) { return read_options<SweepOptions>(doc.section()); }

}  // namespace pipelab::tools
