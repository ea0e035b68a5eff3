#pragma once
/// A scheme over replicas of its pipeline (`partition.replicas`, core/schedule/replicate.h):
/// the schedule, placement and validation rules of R copies of a scheme's S-stage pipeline.
/// Every caller that asks a scheme for these (the runner, describe, simulate, schedule)
/// asks here, so a scheme never sees its replicas and every scheme takes them.
#include <vector>

#include "core/optim/gradient_options.h"
#include "core/scheme/scheme.h"

namespace pipelab {

/// What a stage's gradients go through before its update, beyond its own backward: the
/// ALLREDUCE before each U (core/comm/gradient_finish.h). Replicas always need it; one
/// replica needs it for a gradient clip or tied weights (docs/schemes.md, "Notation and optimizers").
struct GradientSync {
  bool always = false;  ///< an ALLREDUCE before every U even with one replica
  CollectiveScope scope = CollectiveScope::Replicas;
};

/// The ALLREDUCE a run of `scheme` needs: with `replicas` replicas, the clip of `options`,
/// and tied weights (`ties`; `ties_cross_stages` when a tie spans two pipeline stages).
/// Every stage meets (CollectiveScope::Model) for a global clip over several stages or a
/// tie across stages.
GradientSync gradient_sync(const GradientOptions& options, const Scheme& scheme, int stages, int replicas,
                           bool ties, bool ties_cross_stages);

/// Whether `options` clip each stage by its own norm (clip_scope: auto picks per_stage for
/// schemes whose weights are asynchronous: their stages do not step together).
bool clips_per_stage(const GradientOptions& options, const Scheme& scheme);

/// The schedule of `stages` pipeline stages over units.size() replicas, replica r running
/// units[r] micro-batches (0: it only joins the all-reduces), with `sync`'s ALLREDUCE. One
/// replica and no sync: the scheme's own schedule, untouched.
Schedule replicated_schedule(const Scheme& scheme, int stages, const std::vector<int>& units,
                             const GradientSync& sync = {});

/// `replicas` replicas of `units` micro-batches each (for tools that name a count, not a
/// mini-batch).
std::vector<int> equal_units(int units, int replicas);

/// The device of each of the stages * replicas stages: replica r's stage p sits on device
/// r * D + placement(p), D the devices of one replica.
std::vector<int> replicated_placement(const Scheme& scheme, int stages, int replicas);

/// The scheme's schedule rules for its replicated schedule: ALLREDUCE allowed (with replicas
/// or `sync`), the bounds repeated for every replica.
ValidateOptions replicated_rules(const Scheme& scheme, int stages, int replicas, const GradientSync& sync = {});

/// PipeDream's replicated stages (`partition.replicas: [2, 1, 1]`): the 1F1B-RR schedule of
/// `units` mini-batches over stages with counts[p] replicas each
/// (core/schedule/generators.h), with its messages and an ALLREDUCE of each stage's replicas
/// before every U.
Schedule replicated_stages_schedule(const std::vector<int>& counts, int units);
/// One device per stage of the replicated stages (numbered as core/schedule/stage_layout.h).
std::vector<int> replicated_stages_placement(const std::vector<int>& counts);
/// The scheme's rules for its replicated-stages schedule: ALLREDUCE allowed, and each
/// replica of stage p holds at most its warm-up w_p + 1 mini-batches in flight.
ValidateOptions replicated_stages_rules(const Scheme& scheme, const std::vector<int>& counts);

/// Why `scheme` cannot run `replicas` replicas ("" when it can). Every scheme can, synchronous
/// or asynchronous (each replica's share of a mini-batch sees the same weight version, so the
/// all-reduced gradient is the one of the whole mini-batch), except one whose stages train
/// auxiliary heads on unscaled per-share losses (interlocking).
std::string replicas_refused(const Scheme& scheme, int replicas);

}  // namespace pipelab
