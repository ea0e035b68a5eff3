#pragma once
/// What a built run must pass before anything is written, so that a bad configuration
/// leaves no partial output: its schedules, the model against the data, and (several
/// processes) one configuration everywhere.
#include <c10/util/Exception.h>
#include <yaml-cpp/yaml.h>

#include "core/experiment/experiment.h"

namespace pipelab {

struct RunParts;

/// The batch size against the plan's split, the first training schedule run (validated, and
/// placed as the scheme places its stages) and the evaluation schedule.
void check_schedules(const Experiment& e, const RunParts& parts);
/// A ConfigError if the model cannot take the dataset's examples (a forward of two of them
/// through every stage of replica 0).
void check_model_takes_data(const Experiment& e, const RunParts& parts);
/// The ConfigError for a LibTorch error raised by running the model on the dataset's examples.
[[noreturn]] void model_data_mismatch(const Experiment& e, const DataSpec& spec, const c10::Error& err);
/// With several processes: every one must run the same experiment (the resolved
/// configurations, executor and provenance aside, are compared); a UserError on every
/// process lists the differing key paths.
void check_processes_agree(const Experiment& e, const YAML::Node& resolved);

}  // namespace pipelab
