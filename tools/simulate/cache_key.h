#pragma once
/// What the on-disk caches of `pipelab plan` share (model profiles, tools/simulate/
/// profile_source.h; proxy runs, tools/plan/proxy_runs.h): where they live, and a digest of
/// what an entry depends on that is stable across builds' runs and machines.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "core/util/cache_folder.h"

namespace pipelab::sim {

/// The cache's folder (core/util/cache_folder.h).
using ::pipelab::cache_folder;

/// FNV-1a, 64 bits: a digest stable across builds and machines (std::hash is neither).
uint64_t fnv1a(const std::string& text);

/// Appends the scalars of `node` to `out`, each file one names followed by its size and
/// modification time (an entry made from a file is stale once the file changes).
void fingerprint(const YAML::Node& node, std::string& out);

/// This build of pipelab (its executable's size and time): a model's code may change while
/// its options stay. "" where the executable cannot be found.
std::string build_fingerprint();

}  // namespace pipelab::sim
