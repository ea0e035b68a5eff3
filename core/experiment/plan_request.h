#pragma once
/// What a run of an experiment file compiles its plan from (core/plan/run_plan.h), read once
/// for every command: `run`, `simulate`, `plan`, `describe`, `check` and `launch` from the
/// experiment they load, `schedule` from a file it draws without building (a scheme alone,
/// with or without a model).
#include "core/config/config_node.h"
#include "core/plan/run_plan.h"

namespace pipelab {

struct Experiment;
class ModelFactory;

/// The request for `scheme` (the file's own, or a tool's what-if) on the file `top`, its
/// sections read as `run` reads them: partition (stages, replicas, recompute), the
/// optimizer's clip and tie options, compression, whether the model ties weights and how it
/// computes sequences, and whether the executor runs several processes. A section the file
/// lacks takes its default; without a model, the schedule is drawn as the scheme makes it.
/// `stages` replaces partition.stages when non-zero; `model`, the model the file's section
/// made when the caller has it (else it is made here from the section).
PlanRequest plan_request(const ConfigNode& top, const Scheme& scheme, int stages = 0,
                         const ModelFactory* model = nullptr);

/// The same for a loaded experiment, before its balance (its file, its scheme): the request
/// read at its load (Experiment::request).
PlanRequest plan_request(const Experiment& e, int stages = 0);

}  // namespace pipelab
