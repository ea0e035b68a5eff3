#pragma once
/// The `sweep:` section of an experiment file, read in one place (docs/contributing.md, habit 4):
///
///   sweep:
///     output: runs/sweeps/demo                  # default: runs/<file name>
///     grid:                                     # key path -> list of values
///       scheme.type: [naive, gpipe]
///       partition.stages: [2, 4]
///     include: [{scheme.type: single, partition.stages: 1}]
///     exclude: [{scheme.type: gpipe, partition.stages: 2}]
///     overrides:
///       - {match: {partition.stages: 4}, set: {optimizer.lr: 0.05}}
///
/// Everything else in the file is the base experiment every cell starts from.
#include <memory>
#include <string>
#include <vector>

#include "core/config/fields.h"

namespace pipelab::tools {

/// One `key.path: value` entry of a grid, include, exclude, match or set mapping; the
/// value keeps its place in the file for error messages.
struct KeyValue {
  std::string key;
  ConfigNode value;
};

/// A mapping of key paths to values, in file order.
struct KeyValues {
  std::vector<KeyValue> items;
  /// True when the mapping has no entry.
  bool empty() const { return items.empty(); }
};

/// One entry of `overrides`: settings applied to the cells that `match` selects.
struct SweepOverride {
  KeyValues match, set;
  template <class V>
  void fields(V& v) {
    v.required("match", match, "the cells it applies to: key path -> value, all must be equal");
    v.required("set", set, "key path -> value to set in those cells");
  }
};

/// The `sweep:` section.
struct SweepOptions {
  std::string output;
  KeyValues grid;
  std::vector<KeyValues> include, exclude;
  std::vector<SweepOverride> overrides;
  template <class V>
  void fields(V& v) {
    v("output", output, "folder of the runs, one sub-folder per cell (default: runs/<file name>)");
    v("grid", grid, "key path -> list of values; every combination is a cell");
    v("include", include, "extra cells: key path -> value; grid keys an entry does not name range over the grid");
    v("exclude", exclude, "cells to leave out: key path -> value, all must be equal");
    v("overrides", overrides, "per-cell settings: [{match: {key: value}, set: {key: value}}]");
  }
  /// Grid values are non-empty lists; no key is set twice; the sweep has a cell.
  void check(const ConfigNode& node) const;
};

/// A sweep file as loaded: the whole tree (with --set overrides applied) and its source.
struct SweepDocument {
  YAML::Node root;
  std::shared_ptr<ConfigSource> source;
  std::string name;  ///< the file's stem: the default output is runs/<name>
  std::string text;  ///< the file's text, to load fresh copies from
  std::vector<std::string> overrides;

  /// Loads `file` with `overrides` ("key.path=value"); a missing `sweep:` section is a ConfigError.
  static SweepDocument load(const std::string& file, const std::vector<std::string>& overrides);
  /// The same from YAML text; `file` stands in for the file name in messages.
  static SweepDocument parse(const std::string& yaml, const std::string& file,
                             const std::vector<std::string>& overrides);
  /// A fresh copy with its own nodes and source, so a cell can be edited without touching
  /// other cells while keeping every line:column of the file (YAML::Clone drops them).
  SweepDocument reload() const { return parse(text, source->file(), overrides); }
  /// The `sweep:` section.
  ConfigNode section() const;
};

/// Reads and checks the `sweep:` section of `doc`.
SweepOptions read_sweep_options(const SweepDocument& doc);

}  // namespace pipelab::tools

namespace pipelab {

template <>
struct ConfigValue<tools::KeyValues> {
  static std::string type() { return "a mapping of key paths to values, like {scheme.type: gpipe}"; }
  static tools::KeyValues read(const ConfigNode& n);
  static YAML::Node write(const tools::KeyValues& v);
};

template <>
struct ConfigValue<tools::SweepOverride> {
  static std::string type() { return "a {match: {...}, set: {...}} mapping"; }
  static tools::SweepOverride read(const ConfigNode& n) { return read_options<tools::SweepOverride>(n); }
  static YAML::Node write(const tools::SweepOverride& v) { return write_options(v); }
};

}  // namespace pipelab
