#pragma once
/// Data parallelism over whole pipelines as a schedule transform (docs/design.md, "Schedules
/// are data", placement with replicas): R copies of one pipeline's schedule run side by side, each on its own
/// devices and its own share of the mini-batch, and the copies of each stage sum their
/// gradients (ALLREDUCE) before that stage's update. Nothing else changes: the executors,
/// the validator and the simulator read the result like any schedule, so every scheme
/// composes with replicas without knowing of them (Megatron-LM's and DeepSpeed's
/// pipeline x data parallelism; `dp` is one stage with replicas).
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// `per_replica[r]`: replica r's complete schedule (with its communication), over its own
/// micro-batches 0..m_r-1; every one has the same stages S and devices D. Replica r's stage
/// p becomes stage r*S + p, its device d device r*D + d, and its micro-batch k micro-batch
/// m_0 + ... + m_(r-1) + k; with two or more replicas each U is preceded by an ALLREDUCE of
/// its stage. One replica: returned as it is.
Schedule replicate(const std::vector<Schedule>& per_replica);

/// `s` with an ALLREDUCE before every U that has none, gathering `scope`'s stages: gradients
/// finished across stages before each update (a global clip, tied weights; docs/schemes.md
/// docs/schemes.md, "Notation and optimizers") or per stage (a per-stage clip, with one replica a collective of one
/// stage).
Schedule synchronize_updates(const Schedule& s, CollectiveScope scope);

/// A schedule's updates only (U actions, in device order): what a replica that gets no
/// share of a small mini-batch still runs, so that it joins its stages' all-reduces.
Schedule updates_only(const Schedule& s);

}  // namespace pipelab
