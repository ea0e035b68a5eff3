#pragma once
/// What the run plan refuses of partition.offload once it knows its schedules
/// (RunPlan::compile): an offload that would move nothing is refused at its key rather than
/// accepted and run as if it were not there.
#include "core/config/config_node.h"
#include "core/model/partition.h"

namespace pipelab {

class RunPlan;

/// Refuses partition.offload over a schedule that moves activations itself (a custom
/// schedule's own OFFLOAD and RELOAD): the pass would add a second copy of each. Called before
/// the plan offloads.
void check_offload_own(const RunPlan& plan, const Offload& offload, const ConfigSource& source);

/// Refuses partition.offload where the pass places no OFFLOAD: a listed stage none of whose
/// micro-batches outlives `prefetch` compute actions of its device (the last stage of 1F1B,
/// every stage of naive model parallelism or of one device), or `always`/`except_last` where no
/// stage offloads anything.
void check_offload_places(const RunPlan& plan, const Offload& offload, const ConfigSource& source);

}  // namespace pipelab
