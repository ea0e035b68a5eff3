#pragma once
/// One runner for every scheme (docs/contributing.md, habit 11): builds the stages from an
/// Experiment, trains for the configured epochs through the configured executor,
/// evaluates each epoch and writes the run's folder. Variation lives in YAML and in
/// registered components, never here.
#include <c10/util/Exception.h>
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/data/loader.h"
#include "core/exec/gradient_finish.h"
#include "core/scheme/replicas.h"
#include "core/train/experiment.h"
#include "core/train/run_plan.h"
#include "core/train/run_record.h"

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
};

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
  /// Bytes of state the boundary codecs hold at the end, over every process (AQ-SGD's
  /// per-example history, error feedback); 0 without such codecs.
  int64_t codec_storage_bytes = 0;
  int64_t parameters = 0;
  /// fp16 (run.amp): each stage's loss scale at the end and the updates it skipped.
  std::vector<double> loss_scales;
  std::vector<int64_t> skipped_updates;
  /// Per stage, the mean of every metric its policy reported (version gaps, ...).
  std::vector<std::map<std::string, double>> stage_means;
  /// Why trace.json, metrics/actions.csv and costs.json are missing though run.trace asked
  /// for them ("" when they were written or not asked for).
  std::string trace_missing;
};

/// The intra-op threads of a run that leaves run.threads at 0: OMP_NUM_THREADS if set, else
/// half the cores, at least 1.
int default_threads();

class Runner {
 public:
  /// Builds and checks everything (data, model, partition, stages, optimizers, schedules)
  /// without writing anything, so a bad configuration leaves no partial output.
  explicit Runner(Experiment& experiment, RunnerOptions options = {});
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  /// The dataset's shapes (after the constructor loaded it).
  const DataSpec& data_spec() const { return data_.spec; }
  /// The first `n` training examples' inputs (at most the training set), in the run's dtype.
  at::Tensor sample_inputs(int64_t n) const;
  /// Trains and evaluates; writes the run folder; returns the summary.
  RunSummary run();

  /// Every stage: replica r's copy of pipeline stage p is stages()[r * pipeline_stages() + p]
  /// (with replicated stages, as stage_layout() numbers them).
  std::vector<Stage*> stages() const;
  int stage_count() const { return static_cast<int>(stages_.size()); }
  /// The scheme's stages (one replica's) and the replicas of the pipeline (partition.replicas).
  int pipeline_stages() const { return plan_.stages(); }
  int replicas() const { return plan_.replicas(); }
  const StageLayout& stage_layout() const { return plan_.layout(); }
  /// The devices the scheme places the stages on (threads, processes, run.devices entries).
  int device_count() const { return plan_.devices(); }
  /// What the run is: its topology, gradient sync and schedules (core/train/run_plan.h).
  const RunPlan& plan() const { return plan_; }
  const std::vector<int>& balance() const { return balance_; }
  const DatasetSplits& data() const { return data_; }
  /// The configuration as resolved (defaults filled in, balance as counts), with provenance.
  YAML::Node resolved_config() const;

 private:
  /// dataset.limit and dataset.test_limit: the splits cut to their seeded subsets.
  void limit_data();
  /// run.epochs, or fewer when run.max_steps ends the run sooner.
  int epochs_to_run() const;
  void build_stages();
  /// What the run plan is compiled from; `ties_cross_stages` once the balance places the ties.
  PlanRequest plan_request(std::optional<bool> ties_cross_stages) const;
  /// Replica r's stages from the model's blocks (split by balance_), appended to stages_.
  void build_replica(int r, std::vector<Block> blocks, const std::vector<c10::Device>& devices);
  /// Resolves the model's tied parameters (ModelDef::ties) into ties_ and starts every
  /// second copy equal to its first.
  void tie_parameters();
  /// init.from: every replica's stages from a state_dict file (the report for the log).
  void load_initial_weights();
  /// init.names' rules: the user's, or the model's published names of its preset.
  std::vector<NameRule> name_rules() const;
  /// Decides sync_ (replicas, clip, ties) and gives every stage the collective its
  /// ALLREDUCE joins (StageSlot::all_reduce; core/train/runner_gradients.cpp).
  void connect_gradients();
  /// Per stage, the bytes of its parameters tied to another pipeline stage's (costs.json).
  std::vector<int64_t> cross_stage_tie_bytes() const;
  /// Gives every slot the boundaries' codecs when the experiment compresses.
  void connect_codecs();
  std::vector<Stage*> replica_stages(int r) const;
  /// run.shadow: sync — a replica of the model observing every stage
  /// (core/train/shadow_sync.h).
  void start_shadow();
  /// Gives every stage its optimizer, learning-rate schedule, weight policy and gradient
  /// route, and the executors their slots.
  void wire_stages(const StageAddOns& add_ons);
  /// Lets the scheme's add-ons add to each stage (e.g. auxiliary heads), given its output shape.
  void prepare_stages(const StageAddOns& add_ons);
  void check_schedules() const;
  /// Validates one training schedule and its agreement with the scheme's placement.
  void check_schedule(const Schedule& s, const ValidateOptions& rules) const;
  /// A ConfigError, before anything is written, if the model cannot take the dataset's
  /// examples (a forward of two of them through every stage).
  void check_model_takes_data();
  /// A `balance: time` split that is the same on every process and across --resume.
  std::vector<int> settled_time_balance(std::vector<int> measured) const;
  /// The ConfigError for a LibTorch error raised by running the model on the dataset's examples.
  [[noreturn]] void model_data_mismatch(const c10::Error& err) const;
  /// With several processes: every one must run the same experiment (the resolved
  /// configurations, executor and provenance aside, are compared); a UserError on every
  /// process lists the differing key paths.
  void check_processes_agree() const;
  std::string init_report_;  ///< what a non-strict init.from left out (logged when the run starts)
  std::string limits_report_;  ///< dataset.limit, dataset.test_limit and run.max_steps, when set
  /// The training schedule with units[r] micro-batches (or mini-batches) on replica r
  /// (with replicated stages: their sum, dealt round robin), kept for the next steps.
  const Schedule& train_schedule(const std::vector<int>& units);
  double lr_at(int64_t step) const;
  EpochMetrics train_epoch(int epoch, RunRecord& record, int64_t& global_step, bool& diverged);
  /// Records one finished mini-batch's loss; false once it is no longer finite.
  using StepDone = std::function<bool(double loss)>;
  /// An epoch of `steps` mini-batches, one schedule run each (flushed per mini-batch).
  void train_mini_batches(int epoch, int64_t steps, RunRecord& record, struct LossTotals& totals,
                          const StepDone& finish_step, bool& diverged);
  /// An epoch of `steps` mini-batches as one schedule run (flushed per epoch).
  void train_epoch_pipeline(int epoch, int64_t steps, RunRecord& record, struct LossTotals& totals,
                            const StepDone& finish_step, bool& diverged);
  /// flush: never — every epoch in one pipeline; returns the epochs' training figures.
  std::vector<EpochMetrics> train_flushless(RunRecord& record, int64_t& global_step, bool& diverged);
  /// Trains, evaluates and records the epochs this session runs (from progress.epochs_done);
  /// false when --stop-after stopped it first (summary.status says so).
  bool run_epochs(RunRecord& record, RunSummary& summary, struct TrainingProgress& progress, bool& diverged);
  /// Starts the run's records, or continues an interrupted run's (--resume) from the state
  /// every process holds (`progress`: where it stood).
  void open_record(RunRecord& record, struct TrainingProgress& progress, bool flushless);
  /// The summary of a run that trained for `seconds`: summary.json, and the table printed.
  void close_run(RunRecord& record, RunSummary& summary, double seconds);
  /// Loads the weights each stage had at the end of epoch `epoch` in a flushless run.
  void load_flushless_snapshot(const RunRecord& record, int epoch);
  /// Training figures of one epoch from its totals and the executor's measurements.
  EpochMetrics epoch_figures(int epoch, const struct LossTotals& totals, int64_t steps, double seconds);
  /// Writes what the policies and routes of this process's stages measured during a
  /// schedule run of epoch `epoch` (another process keeps them for gather_stage_metrics).
  void collect_stage_metrics(RunRecord& record, int epoch);
  /// Brings the other processes' stage metrics to the writer's record (runner_stage_metrics.cpp;
  /// a collective, once per epoch; nothing in one process).
  void gather_stage_metrics(RunRecord& record);
  void evaluate(EpochMetrics& m);
  /// Records a finished epoch (files, log line, best accuracy, checkpoints).
  void finish_epoch(RunRecord& record, RunSummary& summary, struct TrainingProgress& progress, const EpochMetrics& m,
                    bool save_state);
  /// The model's weights as checkpoints/<name>.pt or .safetensors (run.checkpoint_format).
  void save_checkpoint(const RunRecord& record, const std::string& name);
  /// trace.json, metrics/actions.csv and metrics/costs.json from the last traced schedule
  /// runs (run.trace). Called on every process (it gathers from all); `writer` writes.
  void write_trace(RunRecord& record, bool writer) const;
  /// Each stage's optimizer state bytes, from the process that runs it (a collective).
  std::vector<int64_t> gathered_optimizer_bytes() const;
  /// What costs.json needs besides the executor's stats.
  struct StageCostInputs stage_cost_inputs(std::vector<int64_t> optimizer_bytes) const;
  std::vector<StagePolicy*> policies() const;
  void finish_summary(RunSummary& s) const;

  Experiment& e_;
  RunnerOptions options_;
  at::ScalarType dtype_;
  DatasetSplits data_;
  ModelDef def_;
  Dataflow dataflow_;  ///< the model's live sets, checked before anything is built
  std::vector<int> balance_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<std::unique_ptr<StagePolicy>> policies_;
  std::vector<std::unique_ptr<GradientRoute>> routes_;  ///< per stage; null: end-to-end
  std::vector<StageSlot> slots_;
  /// The boundaries' codecs (core/compress/compression.h); null without compression.
  std::unique_ptr<BoundaryCodecs> codecs_;
  std::unique_ptr<DataLoader> train_, test_;
  std::map<std::vector<int>, Schedule> schedules_;
  /// The run plan: stages, replicas or replicated stages, placement, gradient sync, and the
  /// schedules every step runs (compiled in build_stages, its sync again once the ties are known).
  RunPlan plan_;
  std::vector<GradientPlan::Tie> ties_;    ///< the model's tied parameters, by pipeline stage
  ExecStats last_train_stats_;  ///< what the executor measured in the last training epoch
  /// Wall time of the executor runs of the last training epoch (costs.json's step_seconds).
  struct StepTiming {
    double seconds = 0;
    int64_t runs = 0, mini_batches = 0;
    void add(double s, int64_t batches) {
      seconds += s;
      ++runs;
      mini_batches += batches;
    }
  } traced_steps_;
  /// Stage metrics of this non-writing process, until gather_stage_metrics sends them.
  struct KeptMetric {
    int epoch = 0, stage = 0;
    StageMetric metric;
  };
  std::vector<KeptMetric> kept_metrics_;
  int metric_rounds_ = 0;  ///< gather_stage_metrics calls so far (the same on every process)
  Schedule eval_schedule_;
  std::unique_ptr<class ShadowSync> shadow_;  ///< null unless run.shadow: sync
};

/// The end-of-run summary for people: epoch table, accuracy, throughput, pipeline figures.
std::string format_summary(const Experiment& e, const RunSummary& s, int stages);
/// summary.json.
std::string summary_json(const Experiment& e, const RunSummary& s, int stages);

}  // namespace pipelab
