#pragma once
/// The runs under a results folder, for tables and plots: every folder holding a
/// config.yaml (written when a run starts), with its summary.json once it has one.
/// Keys are config key paths, or short aliases: model, scheme, stages, dataset, seed,
/// optimizer, lr, chunks.
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace pipelab::tools {

/// One run folder. Copy-construct only: assigning a YAML::Node re-points the node it was
/// copied from (yaml-cpp's reference semantics).
struct RunInfo {
  std::string dir;     ///< its path
  std::string name;    ///< its path relative to the folder searched ("." for that folder itself)
  YAML::Node config;   ///< config.yaml
  YAML::Node summary;  ///< summary.json; undefined while the run has none (interrupted or running)
  /// Its cell's place in its sweep's grid (from <sweep.output>/sweep-order.txt, which
  /// `pipelab sweep` writes), or -1: tables and plots keep the grid's order.
  int grid_order = -1;
  /// True once the run has ended (finished or diverged).
  bool has_summary() const { return summary.IsDefined(); }
  /// True when its summary says the training loss became NaN or infinite.
  bool diverged() const;
};

/// Every run folder under `root` (itself included), sorted by name. A missing folder, or
/// one without any run, is a UserError. A run whose config.yaml or summary.json cannot be
/// read (empty, damaged, not a file) is left out and named in `skipped` ("NAME: why"); when
/// every run is left out, that is a UserError listing them.
std::vector<RunInfo> load_runs(const std::string& root, std::vector<std::string>* skipped = nullptr);

/// The config key path an alias stands for (`stages` -> `partition.stages`); other keys as given.
std::string resolve_key(const std::string& key);
/// "model = model.type, scheme = scheme.type, ..." for help texts.
std::string key_aliases_help();
/// Splits "scheme,stages" into resolved key paths; an empty key ("a,,b", ",") is a UserError
/// naming `option`.
std::vector<std::string> parse_keys(const std::string& list, const std::string& option);

/// The text of `key` in the run's config ("gpipe", "4", "2-1-1"), nullopt when absent.
std::optional<std::string> config_text(const RunInfo& run, const std::string& key);
/// The values of `keys` joined with "/", "-" for an absent one: a row, column or group label.
std::string label_of(const RunInfo& run, const std::vector<std::string>& keys);
/// UserError unless some run has `key` in its config; names `option` and suggests keys.
void require_config_key(const std::vector<RunInfo>& runs, const std::string& key, const std::string& option);

/// Keeps the runs whose config has each `key=value` of `where` (values compare as YAML,
/// numbers as numbers). A malformed condition is a UserError.
std::vector<RunInfo> filter_runs(const std::vector<RunInfo>& runs, const std::vector<std::string>& where);

/// Config key paths whose values differ between `runs`, ignoring the seed, the output
/// folder, thread counts, progress display and provenance: what a group of runs mixes
/// besides seeds (for warnings when mean ± std would average different experiments).
std::vector<std::string> differing_keys(const std::vector<const RunInfo*>& runs);

/// Orders labels as people expect: numbers by value, digit runs inside text by value
/// ("stages=4" before "stages=16"), the rest alphabetically.
bool natural_less(const std::string& a, const std::string& b);

}  // namespace pipelab::tools
