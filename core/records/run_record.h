#pragma once
/// A run's folder (docs/results.md):
///   config.yaml          resolved configuration + pipelab version and git revision
///   metrics/steps.csv    step, epoch, loss, lr             (+ steps.jsonl)
///   metrics/epochs.csv   per-epoch train/test loss and accuracy, times (+ epochs.jsonl)
///   metrics/stages.csv   epoch, step, stage, metric, value: what scheme policies measure
///                        (version gaps, prediction errors, stored versions)
///   summary.json         final and best accuracy, throughput, status
///   checkpoints/*.pt     state dicts that Python's torch.load reads
///   log.txt              the human-readable epoch lines and summary
/// Files are appended line by line or replaced atomically, so an interrupted run keeps
/// every finished epoch and never leaves a half-written summary or checkpoint. Step lines
/// reach the disk at least once a second and at every epoch end (a flush per step would
/// cost a system call per step). Every write is checked: one that fails (a full disk)
/// stops the run with a WriteError, and --resume cuts the files back to the last finished
/// epoch. One process at a time owns a run folder (an exclusive lock on `.lock`).
#include <chrono>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include <yaml-cpp/yaml.h>

#include "core/scheme/scheme.h"

namespace pipelab {

struct StepMetrics {
  int64_t step = 0;
  int epoch = 0;
  double loss = 0;
  double lr = 0;
  /// Simulated training seconds up to the end of this step (`run --cluster`); NaN without.
  double simulated_time = std::numeric_limits<double>::quiet_NaN();
};

struct EpochMetrics {
  int epoch = 0;  ///< 1-based
  double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0, lr = 0;
  /// The Matthews correlation x 100 on the test set (DataSpec::metric "mcc", as GLUE reports
  /// CoLA); NaN where the data has no such metric.
  double test_mcc = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0, train_seconds = 0, eval_seconds = 0;
  double samples_per_second = 0, data_wait_fraction = 0;
  /// Bytes sent forward / backward over all stage boundaries per training step.
  double bytes_forward_per_step = 0, bytes_backward_per_step = 0;
  /// The epoch's training steps on the simulated cluster (`run --cluster`); NaN without.
  double simulated_seconds = std::numeric_limits<double>::quiet_NaN();
};

/// The numeric fields of EpochMetrics after `epoch`, in CSV column order.
const std::vector<std::pair<std::string, double EpochMetrics::*>>& epoch_fields();

/// Calls `fn(stage, metric, value)` for every row of a metrics/stages.csv at `path`, in file
/// (= time) order, skipping rows without a value; a missing file calls nothing.
void for_each_stage_metric(const std::string& path,
                           const std::function<void(int stage, const std::string& metric, double value)>& fn);

class RunRecord {
 public:
  explicit RunRecord(std::string dir) : dir_(std::move(dir)) {}
  ~RunRecord();
  RunRecord(RunRecord&& other) noexcept;
  RunRecord& operator=(RunRecord&&) = delete;
  RunRecord(const RunRecord&) = delete;
  /// A process of a multi-process run that does not write the results: its folder gets
  /// config.yaml and log.txt only; metric, summary and checkpoint writes are ignored.
  static RunRecord log_only(std::string dir) {
    RunRecord r(std::move(dir));
    r.log_only_ = true;
    return r;
  }
  bool is_log_only() const { return log_only_; }
  const std::string& dir() const { return dir_; }
  /// True when `dir` holds a finished run (a summary.json).
  static bool finished(const std::string& dir);
  /// Creates the folder and writes config.yaml and the CSV headers. A folder with a
  /// finished run is a UserError unless `overwrite`.
  void begin(const YAML::Node& resolved_config, bool overwrite);
  /// Reopens an interrupted run's folder after `epochs_done` finished epochs: checks that
  /// config.yaml describes the same experiment, and drops metric lines of later epochs.
  void resume(const YAML::Node& resolved_config, int epochs_done);
  /// The training-state checkpoint an interrupted run resumes from.
  std::string state_path() const { return checkpoint_path("state.pt"); }
  void step(const StepMetrics& m);
  /// Measurements of stage `stage`'s policy during epoch `epoch` (1-based).
  void stage_metrics(int epoch, int stage, const std::vector<StageMetric>& rows);
  void epoch(const EpochMetrics& m);
  void log(const std::string& line);
  void summary(const std::string& json);
  /// Writes `name` (a path under the run folder) atomically.
  void file(const std::string& name, const std::string& text);
  std::string checkpoint_path(const std::string& name) const;

 private:
  void open_streams();
  /// begin() and resume() of a log-only record: its folder, config.yaml and log.txt.
  void begin_log_only(const YAML::Node& resolved_config, bool resuming);
  /// Removes every file an earlier run in the folder wrote (a fresh start).
  void clear_earlier_run() const;
  /// Appends a line and hands it to the OS (the stream stays open between steps).
  void write_line(std::ofstream& out, const char* name, const std::string& line);
  /// Flushes `out` and throws WriteError if anything written to it failed.
  void flush(std::ofstream& out, const char* name);
  /// Takes the folder's lock (UserError if another process holds it) and removes what a
  /// killed process left half-written.
  void claim();

  std::string dir_;
  int lock_fd_ = -1;
  bool log_only_ = false;
  std::ofstream steps_csv_, steps_jsonl_, epochs_csv_, epochs_jsonl_, stages_csv_, log_;
  std::chrono::steady_clock::time_point last_step_flush_;
};

}  // namespace pipelab
