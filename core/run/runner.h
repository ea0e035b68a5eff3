#pragma once
/// One runner for every scheme (docs/contributing.md, habit 11): builds the run from an
/// Experiment (core/assembly/run_builder.h), trains it pass by pass through the configured
/// executor (core/run/step_loop.h), evaluates each epoch, checkpoints it
/// (core/run/run_checkpoints.h) and records it (core/run/run_recorder.h). Variation
/// lives in YAML, in the run plan and in registered components, never here.
#include <memory>
#include <vector>

#include "core/assembly/run_builder.h"
#include "core/assembly/run_parts.h"
#include "core/experiment/experiment.h"
#include "core/run/evaluation.h"
#include "core/run/run_recorder.h"
#include "core/run/simulated_clock.h"

namespace pipelab {

struct RunnerOptions {
  bool overwrite = false;  ///< replace a finished run in the output folder
  bool quiet = false;      ///< no progress bar and no epoch lines on stdout
  /// Continue an interrupted run in the output folder from checkpoints/state.pt (a
  /// finished run is left as it is; no state means a fresh start).
  bool resume = false;
  /// End the session after this many more epochs, leaving the run resumable (0: never).
  int stop_after = 0;
  /// Print the summary at the end (quiet or not: it is the result); off for runs another
  /// command drives (pipelab check).
  bool summary = true;
  /// Each step's time on a simulated cluster (`run --cluster`), recorded beside the
  /// measured one; off by default.
  SimulatedClock clock;
  /// `run --dump-batches N`: the first N steps' micro-batches as the stages read them, in
  /// <run.output>/batches.safetensors (core/feed/batch_dump.h); 0: none.
  int64_t dump_batches = 0;
};

class Runner {
 public:
  /// Builds and checks everything (data, model, partition, stages, optimizers, schedules)
  /// without writing anything, so a bad configuration leaves no partial output.
  explicit Runner(Experiment& experiment, RunnerOptions options = {});
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  /// The dataset's shapes (after the constructor loaded it).
  const DataSpec& data_spec() const { return parts_->data.spec; }
  /// The first `n` training examples' inputs (at most the training set), in the run's dtype.
  at::Tensor sample_inputs(int64_t n) const { return parts_->sample_inputs(n); }
  /// Trains and evaluates; writes the run folder; returns the summary.
  RunSummary run();
  /// The figures of the weights in `path` (a state dict of this model: a run's
  /// checkpoints/final.pt or .safetensors) on the test split, or on the training split in
  /// evaluation mode, as each epoch's evaluation computes them (`pipelab eval`). Loads them
  /// into the stages; writes nothing.
  Evaluation evaluate(const std::string& path, bool train_split);
  /// Records each step's time on a simulated cluster too (set before run(); the command
  /// line derives it from plan(), which exists only once the runner is built).
  void simulate_on(SimulatedClock clock) { options_.clock = std::move(clock); }

  /// Every stage: replica r's copy of pipeline stage p is stages()[r * pipeline_stages() + p]
  /// (with replicated stages, as stage_layout() numbers them).
  std::vector<Stage*> stages() const { return parts_->all_stages(); }
  int stage_count() const { return parts_->stage_count(); }
  /// The scheme's stages (one replica's) and the replicas of the pipeline (partition.replicas).
  int pipeline_stages() const { return plan().stages(); }
  int replicas() const { return plan().replicas(); }
  const StageLayout& stage_layout() const { return plan().layout(); }
  /// The devices the scheme places the stages on (threads, processes, run.devices entries).
  int device_count() const { return plan().devices(); }
  /// What the run is: its topology, gradient sync and schedules (core/plan/run_plan.h).
  const RunPlan& plan() const { return parts_->plan; }
  const std::vector<int>& balance() const { return parts_->balance; }
  const DatasetSplits& data() const { return parts_->data; }
  /// The configuration as resolved (defaults filled in, balance as counts), with provenance.
  YAML::Node resolved_config() const;

 private:
  /// Trains, evaluates and records the epochs this session runs (from progress.epochs_done),
  /// pass by pass; false when --stop-after stopped it first (summary.status says so).
  bool train_epochs(struct RunSession& session);
  /// Evaluates and records the epochs a pass trained (each on the weights it ended with).
  void finish_pass(RunSession& session, int first, std::vector<EpochMetrics> trained);
  /// Records a finished epoch (files, log line, best accuracy, checkpoints, training state).
  void finish_epoch(RunSession& session, const EpochMetrics& m, bool save_state);

  Experiment& e_;
  RunnerOptions options_;
  std::unique_ptr<RunParts> parts_;
};

}  // namespace pipelab
