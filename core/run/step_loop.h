#pragma once
/// The step loop: one loop for every flush span. Training is cut into passes (a pass trains
/// the epochs evaluated together: one, or every epoch of a pipeline never flushed) and each
/// pass into schedule runs (one per mini-batch, or one for the whole pass), as the run plan
/// says (RunPlan::epochs_per_pass, mini_batches_per_run); each run reads the feed the plan
/// makes for it (plan_feed, core/feed/run_feeds.h). The loop only counts: what a run does
/// is the plan's.
#include <map>
#include <memory>
#include <vector>

#include "core/experiment/experiment.h"
#include "core/run/run_checkpoints.h"
#include "core/run/run_recorder.h"
#include "core/run/simulated_clock.h"

namespace pipelab {

struct RunParts;
struct LossTotals;

class StepLoop {
 public:
  /// `quiet`: no progress bar; `clock`: each step's simulated time, recorded with it.
  StepLoop(const Experiment& experiment, RunParts& parts, RunRecorder& recorder, RunCheckpoints& checkpoints,
           bool quiet, SimulatedClock clock = {});

  /// run.epochs, or fewer when run.max_steps ends the run sooner.
  int epochs_to_run() const;
  /// Trains `epochs` epochs from epoch `first` (0-based) as one pass and returns each one's
  /// training figures. Every mini-batch's loss is recorded at global step `global_step`
  /// (which moves on). `diverged` turns true once a loss is not finite, on every process
  /// alike; the pass ends with the schedule run that saw it. A pass of several epochs saves
  /// each epoch's weights at its end (RunCheckpoints::watch_epochs).
  std::vector<EpochMetrics> train(int first, int epochs, int64_t& global_step, bool& diverged);
  /// Evaluates the model (replica 0's stages) on the test set into `m`.
  void evaluate(EpochMetrics& m);
  /// Times the steps by `clock` from now on (a resumed run keeps the one it started with).
  void set_clock(SimulatedClock clock) { clock_ = std::move(clock); }
  /// Records the micro-batches of the steps `dump` wants as the stages read them (`run
  /// --dump-batches`); null: none.
  void set_dump(class BatchDump* dump) { dump_ = dump; }
  /// What the last pass measured (the recorder's trace, costs and summary read it).
  const PassMeasurements& measured() const { return measured_; }

 private:
  /// Each epoch's share of a pass: its totals, its last step and when it finished.
  struct EpochTally;
  /// The training schedule with units[r] micro-batches (or mini-batches) on replica r, kept
  /// for the next runs.
  const Schedule& training_schedule(const std::vector<int>& units);
  /// The pass's schedule runs over its `steps` mini-batches (`per_epoch` each epoch).
  void run_schedules(int first, int64_t steps, int64_t per_epoch, class Progress& progress,
                     std::vector<EpochTally>& tally, int64_t& global_step, bool& diverged);
  /// Training figures of one epoch from its tally and the executor's measurements.
  EpochMetrics epoch_figures(int epoch, const EpochTally& tally, double seconds) const;

  const Experiment& e_;
  RunParts& parts_;
  RunRecorder& recorder_;
  RunCheckpoints& checkpoints_;
  bool quiet_;
  SimulatedClock clock_;
  class BatchDump* dump_ = nullptr;
  std::map<std::vector<int>, Schedule> schedules_;
  Schedule eval_schedule_;
  PassMeasurements measured_;
};

}  // namespace pipelab
