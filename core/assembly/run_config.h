#pragma once
/// The configuration a run records (config.yaml): defaults filled in, the balance as counts,
/// with provenance (version, revision, runtime, threads, plugins).
#include <yaml-cpp/yaml.h>

#include "core/experiment/experiment.h"

namespace pipelab {

struct RunParts;

YAML::Node resolved_config(const Experiment& e, const RunParts& parts);

}  // namespace pipelab
