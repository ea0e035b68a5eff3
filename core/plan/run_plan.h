#pragma once
/// The run plan: what a run of a scheme is, compiled once from the scheme, the topology
/// (stages, copies of the whole pipeline or PipeDream's replicated stages, their devices),
/// the gradient sync (replicas' sums, a global clip, tied weights) and what one step is
/// (StepShape). A value with no data in it: core/feed feeds a run by it. `pipelab run`
/// trains by it, and `schedule`, `simulate` and `plan` print and replay its schedules, so
/// what they show is what runs. The refusals a topology meets (a scheme that cannot take replicas,
/// replicated stages with a clip, a codec on a boundary no message crosses) are here too,
/// with one message for every command.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/compress/compression.h"
#include "core/model/partition.h"
#include "core/optim/gradient_options.h"
#include "core/plan/step_shape.h"
#include "core/schedule/offload.h"
#include "core/schedule/stage_layout.h"
#include "core/scheme/replicas.h"

namespace pipelab {

class ConfigSource;

/// What a plan is compiled from: plain values a command reads from its file and flags.
struct PlanRequest {
  const Scheme* scheme = nullptr;
  int stages = 1;             ///< partition.stages as asked (a scheme may fix its own)
  Replicas replicas;          ///< partition.replicas: one count, or one per stage
  GradientOptions gradients;  ///< the optimizer section's clip and tie options
  bool tied_weights = false;  ///< the model ties parameters (ModelFactory::ties_weights)
  /// Whether a tie spans two pipeline stages. Unset: when there are several stages, since
  /// the ties pipelab's models make (an embedding and the output head) sit in the first and
  /// the last block; the run sets it from its balance.
  std::optional<bool> ties_cross_stages;
  bool several_processes = false;  ///< a multi-process executor
  /// The boundaries' codecs (the file's compression section; none by default): a codec that
  /// codes no message of the plan is refused.
  CompressionSection compression;
  /// partition.recompute: the pipeline stages that recompute their forwards in backward.
  Recompute recompute;
  /// partition.offload: the pipeline stages whose kept activations go to host memory.
  Offload offload;
  /// Whether the model computes a sequence segment by segment, and its per-token work
  /// (ModelFactory::segment_token_work): a scheme that splits sequences needs it.
  std::optional<double> segment_token_work;
  /// Where the file's keys are (errors at partition.replicas name the file and line).
  std::shared_ptr<const ConfigSource> source;
};

class RunPlan {
 public:
  /// Compiles the plan, refusing (ConfigErrors at partition.replicas or scheme.flush) what
  /// no run of it could do.
  static RunPlan compile(const PlanRequest& request);
  /// `replicas` copies of the whole pipeline with a sync given as it is (the simulator's
  /// what-ifs and its tests, which name a sync rather than a file's options).
  static RunPlan whole_pipelines(const Scheme& scheme, int stages, int replicas, const GradientSync& sync);

  const Scheme& scheme() const { return *scheme_; }
  /// One pipeline's stages (the scheme's count).
  int stages() const { return stages_; }
  /// Copies of the whole pipeline (1 with replicated stages).
  int replicas() const { return replicas_; }
  /// Every stage's (pipeline stage, replica), numbered replica by replica.
  const StageLayout& layout() const { return layout_; }
  /// The most copies of one pipeline stage: the replicas, or the largest per-stage count.
  int copies() const;
  /// The device of every stage (stage ids as layout() numbers them).
  const std::vector<int>& placement() const { return placement_; }
  int devices() const;
  /// Whether stage `stage` (stage ids as layout() numbers them) recomputes every forward in
  /// its backward by partition.recompute (a scheme's own choice is its policy's).
  bool recomputes(int stage) const;
  /// What stage `stage` keeps in memory: its scheme's figures, recomputing where
  /// partition.recompute says so too (what `simulate` and `plan` replay).
  StageMemory stage_memory(int stage) const;
  /// Whether stage `stage` (stage ids as layout() numbers them) moves some micro-batches'
  /// kept activations to host memory (partition.offload): its schedules carry OFFLOAD and
  /// RELOAD actions (core/schedule/offload.h).
  bool offloads(int stage) const;
  bool offloads_any() const { return offload_.any(); }
  /// The ALLREDUCE before each update: the replicas' sums, a global clip, tied weights.
  const GradientSync& sync() const { return sync_; }
  /// Whether its stages run in processes of their own (the distributed executor, `pipelab
  /// launch`): their all-reduce gathers every member's gradients (core/processes/
  /// group_all_reduce.cpp), where one process sums them in place.
  bool several_processes() const { return several_processes_; }
  /// The pipeline positions the boundaries' codecs number (replicated stages: the pipeline
  /// stages; else every stage), and stage -> position.
  int codec_positions() const;
  std::function<int(int)> codec_position() const;
  /// What the training schedules are validated against.
  ValidateOptions rules() const;
  /// One optimizer step on loader batches of `batch_size` examples: a flushed step splits its
  /// mini-batch into `micro_batches` per replica (0: the scheme's own count, GPipe's chunks);
  /// a pipeline that runs on takes one loader batch per unit and updates after the scheme's
  /// own count of them (1 for PipeDream, `micro_batches` for 2BW and XPipe), unless a what-if
  /// (`simulate --microbatches`) cuts each batch into `micro_batches` units. What `run`
  /// trains and `simulate` and `plan` replay (core/plan/step_shape.h).
  StepShape step(int64_t batch_size, int micro_batches = 0) const;
  /// Whether the pipeline drains at every mini-batch (StepShape::flushed).
  bool flushed() const;
  /// Micro-batches each replica runs for a mini-batch of `n` examples (a replica's share of
  /// it, split into the scheme's micro-batches).
  std::vector<int> units_for_batch(int64_t n) const;
  /// The units of one schedule run that covers `mini_batches` mini-batches of `batch_size`
  /// examples: with a flush per mini-batch, each replica's micro-batches of its share of one
  /// mini-batch; otherwise the mini-batches, one unit each, every replica taking a share of
  /// each (replicated stages: dealt round robin).
  std::vector<int> run_units(int64_t batch_size, int64_t mini_batches) const;
  /// Refuses (a ConfigError at run.batch_size) a mini-batch too small to split as the plan
  /// splits it: into the scheme's micro-batches on every replica, or a share per replica.
  void check_batch_size(int64_t batch_size) const;
  /// How each micro-batch's sequences are cut into units (core/scheme/sequence_split.h; the
  /// model's token work filled in); inactive for a scheme whose units are micro-batches.
  const SequenceSplit& sequence_split() const { return split_; }
  /// Refuses (a ConfigError at scheme.segments) examples of `input_shape` that cannot be cut
  /// into the split's segments: not sequences, or fewer tokens than segments.
  void check_sequences(const std::vector<int64_t>& input_shape) const;
  /// The training schedule with `units[r]` micro-batches (or mini-batches) on replica r
  /// (with replicated stages: their sum, dealt round robin), with its messages: what the
  /// executors run.
  Schedule training(const std::vector<int>& units) const;
  /// The same before lowering (the scheme's compute schedule over the replicas; replicated
  /// stages have no other form): what the schedule's validation and the ideal bubble read.
  Schedule program(const std::vector<int>& units) const;

  // How training is cut, as the step loop reads it (the scheme's flush span, read here only).
  /// Epochs one pass trains before they are evaluated, of `epochs_left`: all of them for a
  /// pipeline never flushed (each evaluated afterwards on the weights saved at its end; such
  /// a run cannot resume from inside), else 1.
  int epochs_per_pass(int epochs_left) const;
  /// Mini-batches one schedule run covers in a pass of `pass_mini_batches`: 1 with a flush
  /// per mini-batch, else the whole pass.
  int64_t mini_batches_per_run(int64_t pass_mini_batches) const;
  /// Whether a run can stop at a step count (run.max_steps): not when one pipeline spans
  /// every epoch.
  bool stops_at_steps() const;
  /// Replica r's copy of every pipeline stage, as stage ids (a replicated stage with fewer
  /// copies gives its last). Replica 0's is the model that evaluation and checkpoints read.
  std::vector<int> replica_view(int r) const;
  /// Replica 0 of whole-pipeline replicas alone, on its own devices, with everything else
  /// kept (the replicas' ALLREDUCE before each update, recomputation, the sequence split):
  /// what the planner replays for plans whose replicas would replay alike (sim::SimOptions::
  /// one_replica). The plan itself when it has no such replicas.
  RunPlan first_replica() const;
  /// Whether its whole-pipeline replicas each run on devices of their own, numbered as the
  /// first's (not a scheme's joint placement, as Chimera's): then the first replica's
  /// schedule is every replica's, and first_replica() stands for each.
  bool separate_replicas() const;

 private:
  const Scheme* scheme_ = nullptr;
  int stages_ = 1, replicas_ = 1;
  bool several_processes_ = false;
  StageLayout layout_;
  std::vector<int> placement_;
  GradientSync sync_;
  std::vector<bool> recompute_;  ///< per pipeline stage (position)
  Offload offload_;
  std::vector<bool> offloading_;  ///< per pipeline stage (position)
  SequenceSplit split_;
  std::shared_ptr<const ConfigSource> source_;  ///< where errors point (the experiment's file)
};

}  // namespace pipelab
