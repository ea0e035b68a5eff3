#pragma once
/// A scheme = a schedule generator + a weight policy + an options struct, and the parts only
/// some schemes have: a replica topology and per-stage add-ons such as gradient routes and
/// auxiliary heads (core/scheme/scheme_parts.h; docs/design.md, "The one idea"). Nothing about
/// a scheme lives anywhere else: executors and the runner call these hooks and never ask which
/// scheme is running.
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/config/registry.h"
#include "core/comm/message.h"
#include "core/scheme/gradient_route.h"
#include "core/scheme/scheme_parts.h"
#include "core/scheme/sequence_split.h"
#include "core/schedule/schedule.h"
#include "core/schedule/validate.h"
#include "core/schedule/weight_copies.h"
#include "core/stage/stage.h"

namespace pipelab {

/// The weight policy of one stage: which weights F and B read (before/after hooks), what U
/// does, what carries across epochs (state), and whether F keeps its activations
/// (checkpoint). What B and H compute is the scheme's GradientRoute
/// (core/scheme/gradient_route.h); what the replicas' ALLREDUCE does is the framework's
/// (core/scheme/replicas.h). One instance per stage, used by that stage's thread only.
class StagePolicy {
 public:
  virtual ~StagePolicy() = default;
  /// Start of a training schedule run over `micro_batches` micro-batches.
  virtual void begin(Stage& /*stage*/, int /*micro_batches*/) {}
  /// Whether the forward of `mb` keeps only its input and is recomputed in backward.
  virtual bool checkpoint(int /*mb*/) const { return false; }
  virtual void before_forward(Stage& /*stage*/, int /*mb*/, Message& /*in*/) {}
  virtual void after_forward(Stage& /*stage*/, int /*mb*/, Message& /*out*/) {}
  virtual void before_backward(Stage& /*stage*/, int /*mb*/) {}
  /// After B, or after W when the backward is split (I, then W).
  virtual void after_backward(Stage& /*stage*/, int /*mb*/) {}
  /// The U action. The default applies one optimizer step with the scheduled LR.
  virtual void update(Stage& stage) { stage.step(); }
  /// End of a training schedule run: every micro-batch has completed (a flush).
  virtual void end(Stage& /*stage*/) {}
  /// Moves the measurements made since the last call into `out` (called by the runner after
  /// every schedule run, from the thread that drives the run).
  virtual void collect(std::vector<StageMetric>& /*out*/) {}
  /// What the policy carries from one epoch to the next (e.g. a weight-stash ring), for
  /// resumable checkpoints; None when it carries nothing.
  virtual c10::IValue state() const { return {}; }
  virtual void load_state(Stage& /*stage*/, const c10::IValue& /*state*/) {}
};

/// What one schedule run covers.
enum class Span {
  MiniBatch,  ///< one mini-batch, split into micro_batches() micro-batches (flush per mini-batch)
  Epoch,      ///< every mini-batch of an epoch, one micro-batch id each (flush per epoch)
  Run,        ///< every mini-batch of every epoch in one pipeline (never flushed)
};

/// What a scheme's step computes, compared with `single` on the same mini-batch: what lets
/// `pipelab plan` rank two schemes by time alone (tools/plan/planner.cpp).
enum class Numerics {
  /// One update per mini-batch from its gradient at one weight version: `single`'s numbers,
  /// whatever the schedule (GPipe, 1F1B with a flush, zero-bubble, V shapes). Planned.
  Synchronous,
  /// The same update from stale or predicted weights (PipeDream's stashing, 2BW, SpecTrain):
  /// planned with `plan --async`, under its staleness bound.
  Asynchronous,
  /// Another algorithm: local losses (Interlocking, DGL), updates per example without
  /// batches (Pipelined Backpropagation): never ranked in place of another scheme.
  Other,
};

/// What a stage of a scheme keeps in memory besides its live weights and one in-flight
/// micro-batch's activations, for memory estimates (`pipelab simulate`, tools/simulate).
struct StageMemory {
  /// Weight-sized copies held at once, the live weights included (PipeDream: D - r stashed
  /// versions; 2BW: its two and the live copy aside while the older is swapped in; a scheme
  /// that swaps predicted weights in: the live copy aside too).
  double weight_versions = 1;
  /// A micro-batch in flight keeps only its input and recomputes the rest for its backward
  /// (activation checkpointing).
  bool recompute = false;
};

/// A registered training scheme (`scheme: {type: gpipe, chunks: 8}`).

class Scheme : public Component {
 public:
  static constexpr const char* kKind = "scheme";
  /// The number of stages this scheme runs when the partition asks for `requested` (0: the
  /// caller has no preference; a scheme that fixes its own count returns it).
  virtual int stages(int requested) const { return requested; }
  /// The number of replicas of the pipeline this scheme runs when the partition asks for
  /// `requested` (`partition.replicas`; core/scheme/replicas.h). `dp` fixes its own.
  virtual int replicas(int requested) const { return requested; }
  /// The device (stage thread, process, `run.devices` entry) of each of `stages` stages; the
  /// default puts stage r on device r. Must agree with the schedule's placement.
  virtual std::vector<int> placement(int stages) const;
  /// How copies of the pipeline are laid out (core/scheme/scheme_parts.h): the default,
  /// copies on devices of their own; Chimera's share them; PipeDream's stages replicate.
  virtual std::shared_ptr<const ReplicaTopology> topology() const { return default_topology(); }
  /// What the scheme adds to each stage (auxiliary heads, gradient routes); the default
  /// adds nothing: end-to-end backprop.
  virtual std::shared_ptr<const StageAddOns> add_ons() const { return no_add_ons(); }
  virtual Span span() const { return Span::MiniBatch; }
  /// What its step computes (Numerics); the default, what a flushed pipeline computes.
  virtual Numerics numerics() const { return Numerics::Synchronous; }
  /// Weight versions a forward reads behind the live ones, beyond what its schedule's order
  /// makes (core/schedule/update_gaps.h): 2BW's double buffer reads the version before the
  /// live one (1); a scheme that reads the live weights, or stashes them at its forward, 0.
  /// With the schedule's gaps it bounds how stale a gradient may be (`pipelab check`).
  virtual int forward_lag() const { return 0; }
  /// Per action of pipeline stage `stage` of `stages` (its actions in the order it runs
  /// them), the work on the stage's weights its policy does beyond the compute: a version
  /// swapped in and the live one put back (3 copies), a version stashed (1), a prediction;
  /// core/schedule/weight_copies.h. What `simulate` and `plan` price where the costs do not
  /// include it (derived, or blocks timed alone). The default: none, the live weights read
  /// in place.
  virtual WeightWorks weight_work(const std::vector<Action>& stage_actions, int /*stage*/, int /*stages*/) const {
    return WeightWorks(stage_actions.size());
  }
  /// Micro-batches per mini-batch (GPipe's chunks); 1 for schemes without micro-batching.
  virtual int micro_batches() const { return 1; }
  /// How the scheme cuts each micro-batch's sequences into schedule units (Seq1F1B,
  /// TeraPipe; core/scheme/sequence_split.h); the default does not: units are micro-batches.
  /// A scheme that does gives schedule(stages, m) the micro-batch count m and returns
  /// m * segments units, set_segments() on its schedule.
  virtual SequenceSplit sequence_split() const { return {}; }
  /// The schedule of one run over `units` micro-batches (or mini-batches) on `stages` stages:
  /// complete (with its messages), or compute-only, which lower() completes as a pipeline.
  virtual Schedule schedule(int stages, int units) const = 0;
  /// Per-stage bound on in-flight micro-batches, checked by the validator (empty: none).
  virtual std::vector<int> max_in_flight(int /*stages*/) const { return {}; }
  /// What the validator holds this scheme's training schedules to: max_in_flight, the
  /// action kinds it runs (F, B, I, W and U; one with auxiliary heads adds H; replicas add
  /// ALLREDUCE, core/scheme/replicas.h), and that every micro-batch is trained on every
  /// stage of the pipeline.
  virtual ValidateOptions schedule_rules(int stages) const;
  /// What stage `stage` of `stages` holds (StageMemory); the default: one weight version,
  /// no recomputation.
  virtual StageMemory stage_memory(int /*stage*/, int /*stages*/) const { return {}; }
  /// The policy of `stage` (which knows its index and the stage count); the default uses
  /// the latest weights.
  virtual std::unique_ptr<StagePolicy> make_policy(Stage& /*stage*/) const { return std::make_unique<StagePolicy>(); }
  /// Why stage `stage` of `stages` cannot train with `optimizer` ("" when it can): what its
  /// policy refuses when built, asked before any stage is (the planner's candidates, whose
  /// emitted file must run). A policy that refuses an optimizer calls it too.
  virtual std::string optimizer_refused(const Optimizer& /*optimizer*/, int /*stage*/, int /*stages*/) const {
    return "";
  }
};

}  // namespace pipelab
