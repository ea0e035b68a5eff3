#pragma once
/// The recorder of a run: its folder's records (core/records/run_record.h) for this process,
/// the per-stage metrics the policies and routes measure, the traced pass's trace.json,
/// metrics/actions.csv and metrics/costs.json, and the summary (summary.json and the table
/// printed at the end). In a multi-process run every process records its own log and the
/// writing one the rest, gathered from all.
#include <string>
#include <utility>
#include <vector>

#include "core/exec/executor.h"
#include "core/experiment/experiment.h"
#include "core/experiment/targets.h"
#include "core/plan/topology.h"
#include "core/records/run_record.h"
#include "core/run/simulated_clock.h"

namespace pipelab {

struct RunParts;
struct StageCostInputs;

/// What a run produced (also written to summary.json).
struct RunSummary {
  std::string status = "finished";  ///< finished | diverged | stopped (resumable) | already finished
  std::string dir;
  std::string final_weights = "checkpoints/final.pt";  ///< relative to dir
  std::vector<EpochMetrics> history;
  int best_epoch = 0;
  double best_test_acc = 0;
  double seconds = 0;
  double samples_per_second = 0;
  double data_wait_fraction = 0;
  double bubble_ideal = 0;     ///< bubble fraction of the schedule with unit costs (F = B = 1)
  double bubble_measured = 0;  ///< ... with the measured per-stage F/B/U times
  double simulated_samples_per_second = 0;  ///< if each stage had its own device
  /// Bytes per step of each kind that moves any, in the last training epoch: SEND_F,
  /// SEND_B, SEND_H (messages between stages), ALLREDUCE (gradients brought to all-reduces:
  /// replicas, a global clip, tied weights). Kinds that moved nothing are left out.
  std::vector<std::pair<ActionKind, double>> traffic_per_step;
  /// Per device, the peak of the bytes the traced epoch's meter saw above the weights
  /// (activations, temporaries, gradients; costs.json's device_peak_bytes); empty untraced.
  std::vector<int64_t> device_peak_bytes;
  /// Per device, the peak of the activations its OFFLOADs held on the host (costs.json's
  /// host_peak_bytes); empty when nothing was offloaded.
  std::vector<int64_t> host_peak_bytes;
  /// The pipeline stages whose OFFLOADs ran but moved nothing in the last epoch: every tensor
  /// their forwards saved is also held elsewhere (their input, their output, a weight), so
  /// partition.offload only adds copies there.
  std::vector<int> offloads_moving_nothing;
  /// Bytes of state the boundary codecs hold at the end, over every process (AQ-SGD's
  /// per-example history, error feedback); 0 without such codecs.
  int64_t codec_storage_bytes = 0;
  /// Where the stages sat (core/plan/topology.h), in the words `plan` and `simulate` use.
  Topology topology;
  /// The model's parameters (one pipeline's stages, a weight tied across two stages counted
  /// once), and the most any device held (every stage copy on it).
  int64_t parameters = 0, resident_parameters = 0;
  /// fp16 (run.amp): each stage's loss scale at the end and the updates it skipped.
  std::vector<double> loss_scales;
  std::vector<int64_t> skipped_updates;
  /// Per stage, the mean of every metric its policy reported (version gaps, ...).
  std::vector<std::map<std::string, double>> stage_means;
  /// Why trace.json, metrics/actions.csv and costs.json are missing though run.trace asked
  /// for them ("" when they were written or not asked for).
  std::string trace_missing;
  /// The simulated cluster's step (`run --cluster`; off without one).
  SimulatedClock clock;
  /// When the run reached each of run.targets.
  std::vector<TargetReached> targets;
};

/// What the step loop measured in its last training pass: the executor's stats (merged over
/// processes) and the wall time of its schedule runs (costs.json's step_seconds).
struct PassMeasurements {
  ExecStats stats;
  double seconds = 0;
  int64_t runs = 0, mini_batches = 0;
  void add_run(double s, int64_t batches) {
    seconds += s;
    ++runs;
    mini_batches += batches;
  }
};

class RunRecorder {
 public:
  /// `quiet`: nothing on stdout but the summary; `print_summary`: the summary too.
  RunRecorder(const Experiment& experiment, const RunParts& parts, bool quiet, bool print_summary);
  RunRecord& record() { return record_; }
  /// Whether this process writes the run's records (the others keep a log of their own).
  bool writer() const;
  bool quiet() const { return quiet_; }
  /// A line for the run's log, and the terminal unless quiet.
  void announce(const std::string& text) { announce(text, quiet_); }
  /// Writes what the policies and routes of this process's stages measured during a schedule
  /// run of epoch `epoch` (another process keeps them for the next gather).
  void collect_stage_metrics(int epoch);
  /// Records a finished epoch: the other processes' stage metrics (a collective), its row
  /// and its line.
  void epoch(const EpochMetrics& m);
  /// trace.json, metrics/actions.csv and metrics/costs.json from the last traced pass
  /// (run.trace). Called on every process (it gathers from all); the writer writes.
  void write_trace(const PassMeasurements& measured);
  /// The summary of a session that trained for `seconds`: summary.json, and the table printed.
  void close(RunSummary& summary, double seconds, const PassMeasurements& measured);

 private:
  void announce(const std::string& text, bool quiet);
  /// Brings the other processes' stage metrics to the writer's record (a collective, once
  /// per epoch; nothing in one process; run_recorder_metrics.cpp).
  void gather_stage_metrics();
  /// Each stage's optimizer state bytes, from the process that runs it (a collective).
  std::vector<int64_t> gathered_optimizer_bytes() const;
  /// What costs.json needs besides the executor's stats.
  StageCostInputs stage_cost_inputs(std::vector<int64_t> optimizer_bytes, const PassMeasurements& measured) const;
  /// The summary's figures from the records and the last pass (run_recorder_summary.cpp).
  void finish_summary(RunSummary& s, const PassMeasurements& measured) const;

  const Experiment& e_;
  const RunParts& parts_;
  bool quiet_, print_summary_;
  RunRecord record_;
  /// Stage metrics of this non-writing process, until gather_stage_metrics sends them.
  struct KeptMetric {
    int epoch = 0, stage = 0;
    StageMetric metric;
  };
  std::vector<KeptMetric> kept_metrics_;
  int metric_rounds_ = 0;  ///< gather_stage_metrics calls so far (the same on every process)
};

/// The end-of-run summary for people: epoch table, accuracy, throughput, pipeline figures.
std::string format_summary(const Experiment& e, const RunSummary& s);
/// summary.json.
std::string summary_json(const Experiment& e, const RunSummary& s);

}  // namespace pipelab
