#pragma once
/// Paths an experiment reads — a dataset's files and folder, a schedule file, the weights it
/// starts from, a TorchScript module, a BPE vocabulary — resolve against the experiment
/// file's folder, so that a file works from any current directory and a sweep's copies of it
/// read what it names. A value given with --set resolves against the current directory, as
/// the shell completed it. Folders an experiment writes (run.output, sweep.output, the
/// default runs/<name>) stay relative to the current directory: results land where you work.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/config/config_node.h"

namespace pipelab {

/// The key paths whose values are paths the experiment reads ("dataset.path", ...).
const std::vector<std::string>& input_path_keys();

/// Rewrites each relative input path of `root` written in `source`'s file (not given with
/// --set) as that file's folder joined with it. Nothing changes for a source that is not a
/// file on disk (text parsed in memory).
void resolve_input_paths(YAML::Node& root, const ConfigSource& source);

/// Rewrites each relative input path of `root`, written to resolve from folder `from`, to name
/// the same file from folder `to` (an experiment written into another folder).
void rebase_input_paths(YAML::Node& root, const std::string& from, const std::string& to);

/// Where `root` names an input path that does not exist: "key.path: value" for each.
std::vector<std::string> missing_input_paths(const YAML::Node& root);

}  // namespace pipelab
