#pragma once
/// Replays one scheme's schedule against a cost model (core/schedule/event_sim.h) and
/// reports what the devices would do: step time, throughput, bubble, bytes moved, and
/// memory per device over time (weights, their versions, optimizer state, activations of
/// the micro-batches in flight).
#include <map>
#include <string>
#include <vector>

#include "core/schedule/event_sim.h"
#include "core/scheme/replicas.h"
#include "core/scheme/scheme.h"
#include "core/plan/run_plan.h"
#include "core/plan/topology.h"
#include "tools/simulate/costs.h"

namespace pipelab::sim {

struct SimOptions {
  bool overlap = true;        ///< compute and communication overlap (else a send blocks its device)
  bool one_worker = false;    ///< one thread runs every device's actions (the sequential executor)
  std::map<int, double> slow; ///< device -> factor its compute takes longer
  /// Copies of the pipeline side by side (partition.replicas, core/schedule/replicate.h):
  /// each runs `units` micro-batches of its share on its own devices, and the copies of a
  /// stage all-reduce its gradients before its update (a ring over the replicas).
  int replicas = 1;
  /// The ALLREDUCE before each update without replicas too (a gradient clip; the runner's
  /// gradient_sync): a global clip makes every stage's update wait for all stages.
  GradientSync sync;
  /// Validate the schedule before replaying it. The planner replays thousands of schedules
  /// the run plan made and validates those it ranks.
  bool validate = true;
  /// Replay only the first of whole-pipeline replicas that would replay alike (each on
  /// devices of its own, placed alike across nodes, no device slowed, no shared host, not one
  /// worker), its ALLREDUCE costed over all of them, and copy its figures to the others'
  /// devices: the same step, bubble and peaks in a replicas-th of the time. The planner's
  /// search sets it (a 1,024-device plan replays 64 devices); `timeline`, `schedule` and
  /// `memory` are then the first replica's alone.
  bool one_replica = false;
  /// Ragged text: the length of each micro-batch's sequences, cycled over the step's
  /// micro-batches (`--tokens`; tools/simulate/unit_scale.h); empty: the costs' length.
  std::vector<double> lengths;
};

/// Memory of one device over time: `bytes` from `time` on.
struct MemoryPoint {
  double time = 0, bytes = 0;
};

struct SimResult {
  Schedule schedule;  ///< what was replayed (with its messages)
  EventTimeline timeline;
  int stages = 0, devices = 0, units = 0;  ///< stage ids of the replayed schedule, its devices and units
  Topology topology;                       ///< the plan's, in the words every command uses
  bool flushed = true;  ///< the replay is one mini-batch's (RunPlan::flushed); else a steady state
  double makespan = 0;
  /// One step: a flushed mini-batch's makespan; for a pipeline that is never (or only per
  /// epoch) flushed, the steady-state time of units_per_step units.
  double step_seconds = 0;
  double samples_per_second = 0;
  double bubble = 0;           ///< idle share of device time over the replay
  std::vector<double> busy;    ///< per device, seconds computing
  double bytes_per_step = 0;   ///< over links and in all-reduces
  std::vector<double> static_bytes;  ///< per device: weights (all versions), gradients, optimizer state, buffers
  std::vector<double> peak_activation_bytes, peak_bytes;  ///< per device
  /// Per device, the most its OFFLOADs held in host memory at once (partition.offload).
  std::vector<double> host_peak_bytes;
  /// Per device, the two gradients of its parameters static_bytes counts: with the peak of
  /// activations, what a run's meter sees (costs.json's peak_activation_bytes), since the
  /// weights and the optimizer's state are allocated before it starts.
  std::vector<double> gradient_bytes;
  std::vector<std::vector<MemoryPoint>> memory;           ///< per device, a step function
};

/// What one stage holds before any activation: its weights in every version its scheme keeps,
/// the gradient being accumulated and the one the optimizer keeps from its last step
/// (pipelab's Optimizer::last_gradient, which predictors read), the optimizer's state, the
/// buffers.
inline double static_bytes(const StageCosts& k, const StageMemory& m) {
  return k.parameter_bytes * (m.weight_versions + 2) + k.optimizer_bytes + k.buffer_bytes;
}

/// The copies of `stage`'s pipeline stage (a replica of the whole pipeline each, or
/// PipeDream's replicated stages): the members of its gradients' all-reduce.
int stage_copies(const RunPlan& plan, int stage);
/// Seconds stage `stage` of `plan` (any copy of a pipeline stage) spends in one ALLREDUCE,
/// as the replay costs it; `one_pipeline`: one pipeline's stage costs.
double collective_seconds(const SimCosts& one_pipeline, const RunPlan& plan, int stage);
/// Seconds of compute action `kind` of stage `stage` of `plan`, as the replay costs it (the
/// codecs' work and a recomputed forward included).
double compute_seconds(const SimCosts& one_pipeline, const RunPlan& plan, int stage, ActionKind kind);

/// Replays the plan's training schedule over `units` units (micro-batches of a flushed
/// scheme's mini-batch, per replica; the run batches of one that is not), with `costs` for
/// one pipeline's stages (every copy of a stage costs the same) and one unit of `examples`
/// examples: the plan's replicas, PipeDream's replicated stages and its gradient sync (the
/// replicas' sums, tied weights) as the run has them. `options.replicas` and `.sync` are
/// the plan's here. A scheme that is not flushed per mini-batch reports as its step the
/// steady-state time of `units_per_step` units.
SimResult simulate(const RunPlan& plan, int units, double examples, const SimCosts& costs, const SimOptions& options,
                   int units_per_step = 1);
/// The same for one step of the plan (RunPlan::step): its replay's micro-batches of its
/// examples, the step being its micro-batches — what `simulate` and `plan` replay.
SimResult simulate(const RunPlan& plan, const StepShape& step, const SimCosts& costs, const SimOptions& options);

/// The same for `options.replicas` copies of the whole pipeline with `options.sync` (the
/// what-ifs of tests and benchmarks, which name a sync rather than a file's options).
/// Replays `scheme` on `stages` stages over `units` units (micro-batches of a flushed
/// scheme's mini-batch; the run batches of one that is not), with `costs` for one unit of
/// `examples` examples. A scheme that is not flushed per mini-batch reports as its step the
/// steady-state time of `units_per_step` units.
SimResult simulate(const Scheme& scheme, int stages, int units, double examples, const SimCosts& costs,
                   const SimOptions& options, int units_per_step = 1);

}  // namespace pipelab::sim
