#include "core/records/run_record.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/config/yaml_file.h"
#include "core/io/atomic_file.h"
#include "core/io/input_file.h"
#include "core/io/json.h"
#include "core/records/metrics_files.h"
#include "core/util/error.h"
#include "core/util/error_text.h"

namespace fs = std::filesystem;

namespace pipelab {

bool RunRecord::finished(const std::string& dir) { return fs::exists(fs::path(dir) / "summary.json"); }

RunRecord::RunRecord(RunRecord&& o) noexcept
    : dir_(std::move(o.dir_)), lock_fd_(o.lock_fd_), log_only_(o.log_only_), steps_csv_(std::move(o.steps_csv_)),
      steps_jsonl_(std::move(o.steps_jsonl_)), epochs_csv_(std::move(o.epochs_csv_)),
      epochs_jsonl_(std::move(o.epochs_jsonl_)), stages_csv_(std::move(o.stages_csv_)), log_(std::move(o.log_)),
      last_step_flush_(o.last_step_flush_) {
  o.lock_fd_ = -1;
}

RunRecord::~RunRecord() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void RunRecord::claim() {
  if (lock_fd_ >= 0) return;
  const std::string lock = (fs::path(dir_) / ".lock").string();
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw UserError(fmt::format("{}: cannot create the run folder's lock file. Fix: check that the folder is writable.", lock));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t n = ::pread(lock_fd_, pid, sizeof pid - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw UserError(fmt::format("{} is in use by another pipelab process{}. Fix: wait for it to finish, or give this "
                                "run another folder with --set run.output=<folder>.",
                                dir_, n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<size_t>(n))) : ""));
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) == 0) (void)!::pwrite(lock_fd_, me.data(), me.size(), 0);
  // Whatever a killed process left between writing a temporary file and renaming it.
  for (const char* sub : {"", "metrics", "checkpoints"}) remove_stale_temporaries((fs::path(dir_) / sub).string());
}

const std::vector<std::pair<std::string, double EpochMetrics::*>>& epoch_fields() {
  static const std::vector<std::pair<std::string, double EpochMetrics::*>> fields{
      {"train_loss", &EpochMetrics::train_loss},
      {"train_acc", &EpochMetrics::train_acc},
      {"test_loss", &EpochMetrics::test_loss},
      {"test_acc", &EpochMetrics::test_acc},
      {"lr", &EpochMetrics::lr},
      {"seconds", &EpochMetrics::seconds},
      {"train_seconds", &EpochMetrics::train_seconds},
      {"eval_seconds", &EpochMetrics::eval_seconds},
      {"samples_per_second", &EpochMetrics::samples_per_second},
      {"data_wait_fraction", &EpochMetrics::data_wait_fraction},
      {"bytes_forward_per_step", &EpochMetrics::bytes_forward_per_step},
      {"bytes_backward_per_step", &EpochMetrics::bytes_backward_per_step},
      // Newer columns go last: a file written before them has a header that is a prefix of
      // today's, and --resume widens it (upgrade_metrics_text).
      {"test_mcc", &EpochMetrics::test_mcc},
      {"simulated_seconds", &EpochMetrics::simulated_seconds}};
  return fields;
}

namespace {

std::string emit(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str()) + "\n";
}

/// The first `keep` lines of a file (all of them if it has fewer).
void keep_lines(const fs::path& path, size_t keep) {
  std::istringstream in(input_exists(path.string()) ? read_file(path.string()) : std::string());
  std::string out, line;
  for (size_t n = 0; n < keep && std::getline(in, line); ++n) out += line + "\n";
  write_file_atomic(path.string(), out);
}

/// The first key path where two resolved configurations differ ("" when they agree).
std::string first_difference(const YAML::Node& a, const YAML::Node& b, const std::string& path) {
  if (a.IsMap() && b.IsMap()) {
    std::vector<std::string> keys;
    for (const auto& kv : a) keys.push_back(kv.first.as<std::string>());
    for (const auto& kv : b) keys.push_back(kv.first.as<std::string>());
    for (const std::string& k : keys) {
      const std::string sub = path.empty() ? k : path + "." + k;
      if (!a[k].IsDefined() || !b[k].IsDefined()) return sub;
      std::string d = first_difference(a[k], b[k], sub);
      if (!d.empty()) return d;
    }
    return "";
  }
  return emit(a) == emit(b) ? "" : (path.empty() ? "(top level)" : path);
}

}  // namespace

void RunRecord::begin(const YAML::Node& resolved_config, bool overwrite) {
  if (log_only_) {
    begin_log_only(resolved_config, false);
    return;
  }
  if (finished(dir_) && !overwrite) {
    throw UserError(fmt::format("{} already holds a finished run. Fix: pass --overwrite to replace it, or choose "
                                "another folder with --set run.output=<folder>.",
                                dir_));
  }
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "metrics", ec);
  fs::create_directories(fs::path(dir_) / "checkpoints", ec);
  if (ec) {
    throw UserError("cannot create the run folder (run.output): " + filesystem_message(dir_, ec));
  }
  claim();
  clear_earlier_run();
  write_file_atomic((fs::path(dir_) / "config.yaml").string(), emit(resolved_config));
  for (const MetricsFile& f : metrics_files()) write_file_atomic((fs::path(dir_) / f.name).string(), f.header + "\n");
  open_streams();
}

void RunRecord::clear_earlier_run() const {
  // A fresh run shows none of an earlier run's files, whatever it got to before it stopped:
  // everything under metrics/ and checkpoints/ (weights, snapshots, resume states, costs)
  // and the top-level records go before anything is written. A file that cannot be removed
  // stops the run: left, it would pass for this run's.
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const char* sub : {"metrics", "checkpoints"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(dir_) / sub, ec)) stale.push_back(entry.path());
  }
  // At the top, only the files a run writes there: a folder by such a name is not a run's.
  for (const char* name : {"summary.json", "trace.json", "log.txt"}) {
    if (!fs::is_directory(fs::path(dir_) / name, ec)) stale.push_back(fs::path(dir_) / name);
  }
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    if (ec) throw WriteError("cannot remove an earlier run's file: " + filesystem_message(p.string(), ec));
  }
}

void RunRecord::begin_log_only(const YAML::Node& resolved_config, bool resuming) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "checkpoints", ec);
  if (ec) throw UserError(fmt::format("{}: cannot create the folder ({}).", dir_, ec.message()));
  claim();
  if (!resuming) {
    // A process's own training states: stale ones from an earlier run would mislead --resume.
    for (const char* stale : {"checkpoints/state.pt", "checkpoints/state.prev.pt"}) fs::remove(fs::path(dir_) / stale, ec);
  }
  write_file_atomic((fs::path(dir_) / "config.yaml").string(), emit(resolved_config));
  log_.open(fs::path(dir_) / "log.txt", (resuming ? std::ios::app : std::ios::trunc) | std::ios::binary);
}

namespace {

/// A configuration without what may differ between sessions of one run: provenance (version,
/// git revision), run.output (a run folder copied or moved elsewhere resumes there) and where
/// the processes meet (a new port, or the host torchrun or SLURM picked this time).
YAML::Node comparable(const YAML::Node& n) {
  YAML::Node copy = YAML::Clone(n);
  if (copy.IsMap()) {
    copy.remove("pipelab");
    if (copy["run"].IsMap()) {
      copy["run"].remove("output");
      if (copy["run"]["executor"].IsMap()) copy["run"]["executor"].remove("master");
    }
  }
  return copy;
}

/// log.txt cut back to the lines before the first epoch (thread layout, init report) and
/// the lines of the `epochs` finished epochs.
void keep_log_of_epochs(const fs::path& log, size_t epochs) {
  std::istringstream in(input_exists(log.string()) ? read_file(log.string()) : std::string());
  std::string out, line;
  size_t seen = 0;
  while (std::getline(in, line)) {
    if (line.rfind("epoch ", 0) == 0 && ++seen > epochs) break;
    if (seen == epochs && epochs > 0 && line.rfind("epoch ", 0) != 0) break;
    out += line + "\n";
  }
  write_file_atomic(log.string(), out);
}

}  // namespace

void RunRecord::resume(const YAML::Node& resolved_config, int epochs_done) {
  if (log_only_) {
    // It keeps no metrics: the writer cuts those back.
    begin_log_only(resolved_config, true);
    return;
  }
  claim();
  // The experiment itself may not differ.
  const std::string config_path = (fs::path(dir_) / "config.yaml").string();
  YAML::Node saved;
  try {
    saved = load_yaml_file(config_path);
  } catch (const UserError& e) {
    throw UserError(fmt::format("the interrupted run's configuration is damaged: {} (Or start the run again with "
                                "--overwrite.)",
                                e.what()));
  }
  const std::string differs = first_difference(comparable(saved), comparable(resolved_config), "");
  if (!differs.empty()) {
    throw UserError(fmt::format("{} holds an interrupted run of a different configuration ({} differs from its "
                                "config.yaml). Fix: resume with the same file and --set values, or choose another "
                                "run.output.",
                                dir_, differs));
  }
  write_file_atomic(config_path, emit(resolved_config));  // the folder it now lives in
  // Every metrics file is checked before any is cut back (metrics_files.h).
  std::vector<size_t> keep;
  for (const MetricsFile& f : metrics_files()) {
    const std::string path = (fs::path(dir_) / f.name).string();
    const std::string text = read_file(path);
    const std::string upgraded = upgrade_metrics_text(text, f);
    if (upgraded != text) write_file_atomic(path, upgraded);  // a run from before a column existed
    keep.push_back(lines_to_keep(upgraded, f, epochs_done, path));
  }
  const size_t step_lines = keep[0] - 1;
  const size_t epochs = static_cast<size_t>(epochs_done);
  for (size_t k = 0; k < keep.size(); ++k) keep_lines(fs::path(dir_) / metrics_files()[k].name, keep[k]);
  keep_lines(fs::path(dir_) / "metrics/steps.jsonl", step_lines);
  keep_lines(fs::path(dir_) / "metrics/epochs.jsonl", epochs);
  keep_log_of_epochs(fs::path(dir_) / "log.txt", epochs);
  open_streams();
}

void RunRecord::open_streams() {
  const auto open = [&](std::ofstream& out, const char* name) {
    out.open(fs::path(dir_) / name, std::ios::app | std::ios::binary);
    if (!out) throw UserError(fmt::format("{}/{}: cannot open for writing.", dir_, name));
  };
  open(steps_csv_, "metrics/steps.csv");
  open(steps_jsonl_, "metrics/steps.jsonl");
  open(epochs_csv_, "metrics/epochs.csv");
  open(epochs_jsonl_, "metrics/epochs.jsonl");
  open(stages_csv_, "metrics/stages.csv");
  open(log_, "log.txt");
}

void RunRecord::write_line(std::ofstream& out, const char* name, const std::string& line) {
  out << line << '\n';
  flush(out, name);
}

void RunRecord::flush(std::ofstream& out, const char* name) {
  out.flush();
  check_written(out, (fs::path(dir_) / name).string());
}

void RunRecord::step(const StepMetrics& m) {
  if (log_only_) return;
  steps_csv_ << fmt::format("{},{},{},{},{}\n", m.step, m.epoch, json::number(m.loss), json::number(m.lr),
                            json::number(m.simulated_time));
  steps_jsonl_ << json::Object()
                      .add("step", m.step)
                      .add("epoch", m.epoch)
                      .add("loss", m.loss)
                      .add("lr", m.lr)
                      .add("simulated_time", m.simulated_time)
                      .str()
               << '\n';
  const auto now = std::chrono::steady_clock::now();
  if (now - last_step_flush_ >= std::chrono::seconds(1)) {
    flush(steps_csv_, "metrics/steps.csv");
    flush(steps_jsonl_, "metrics/steps.jsonl");
    last_step_flush_ = now;
  }
}

void RunRecord::stage_metrics(int epoch, int stage, const std::vector<StageMetric>& rows) {
  if (log_only_) return;
  for (const StageMetric& m : rows) {
    stages_csv_ << fmt::format("{},{},{},{},{}\n", epoch, m.step, stage, m.name, json::number(m.value));
  }
}

void RunRecord::epoch(const EpochMetrics& m) {
  if (log_only_) return;
  flush(steps_csv_, "metrics/steps.csv");
  flush(steps_jsonl_, "metrics/steps.jsonl");
  flush(stages_csv_, "metrics/stages.csv");
  std::string csv = std::to_string(m.epoch);
  json::Object o;
  o.add("epoch", m.epoch);
  for (const auto& [name, field] : epoch_fields()) {
    csv += "," + json::number(m.*field);
    o.add(name, m.*field);
  }
  write_line(epochs_csv_, "metrics/epochs.csv", csv);
  write_line(epochs_jsonl_, "metrics/epochs.jsonl", o.str());
}

void RunRecord::log(const std::string& line) { write_line(log_, "log.txt", line); }

void RunRecord::summary(const std::string& json) {
  if (log_only_) return;
  write_file_atomic((fs::path(dir_) / "summary.json").string(), json + "\n");
}

void RunRecord::file(const std::string& name, const std::string& text) {
  if (log_only_) return;
  write_file_atomic((fs::path(dir_) / name).string(), text);
}

std::string RunRecord::checkpoint_path(const std::string& name) const {
  return (fs::path(dir_) / "checkpoints" / name).string();
}

void for_each_stage_metric(const std::string& path,
                           const std::function<void(int stage, const std::string& metric, double value)>& fn) {
  std::istringstream in(input_exists(path) ? read_file(path) : std::string());
  std::string line;
  std::getline(in, line);  // header: epoch,step,stage,metric,value
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string epoch, step, stage, name, value;
    std::getline(fields, epoch, ',');
    std::getline(fields, step, ',');
    std::getline(fields, stage, ',');
    std::getline(fields, name, ',');
    std::getline(fields, value, ',');
    if (value.empty() || value == "null") continue;
    try {
      fn(std::stoi(stage), name, std::stod(value));
    } catch (const std::logic_error&) {  // a line cut short by a kill; --resume cuts it
    }
  }
}

}  // namespace pipelab
