#include "core/train/run_record.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "core/io/atomic_file.h"
#include "core/io/json.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace pipelab {

bool RunRecord::finished(const std::string& dir) { return fs::exists(fs::path(dir) / "summary.json"); }

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
      {"bytes_backward_per_step", &EpochMetrics::bytes_backward_per_step}};
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
  std::istringstream in(fs::exists(path) ? read_file(path.string()) : std::string());
  std::string out, line;
  for (size_t n = 0; n < keep && std::getline(in, line); ++n) out += line + "\n";
  write_file_atomic(path.string(), out);
}

}  // namespace

void RunRecord::begin(const YAML::Node& resolved_config, bool overwrite) {
  if (log_only_) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw UserError(fmt::format("{}: cannot create the folder ({}).", dir_, ec.message()));
    write_file_atomic((fs::path(dir_) / "config.yaml").string(), emit(resolved_config));
    log_.open(fs::path(dir_) / "log.txt", std::ios::trunc | std::ios::binary);
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
  if (ec) throw UserError(fmt::format("{}: cannot create the run folder ({}).", dir_, ec.message()));
  for (const char* stale : {"summary.json", "metrics/steps.jsonl", "metrics/epochs.jsonl", "log.txt",
                            "checkpoints/state.pt"}) {
    fs::remove(fs::path(dir_) / stale, ec);
  }
  write_file_atomic((fs::path(dir_) / "config.yaml").string(), emit(resolved_config));
  write_file_atomic((fs::path(dir_) / "metrics/steps.csv").string(), "step,epoch,loss,lr\n");
  write_file_atomic((fs::path(dir_) / "metrics/stages.csv").string(), "epoch,step,stage,metric,value\n");
  std::string header = "epoch";
  for (const auto& [name, field] : epoch_fields()) header += "," + name;
  write_file_atomic((fs::path(dir_) / "metrics/epochs.csv").string(), header + "\n");
  open_streams();
}

void RunRecord::resume(const YAML::Node& resolved_config, int epochs_done) {
  // Provenance (version, git revision) may differ; the experiment itself may not.
  const auto without_provenance = [](YAML::Node n) {
    YAML::Node copy = YAML::Clone(n);
    copy.remove("pipelab");
    return emit(copy);
  };
  const std::string saved = read_file((fs::path(dir_) / "config.yaml").string());
  if (without_provenance(YAML::Load(saved)) != without_provenance(resolved_config)) {
    throw UserError(fmt::format("{} holds an interrupted run of a different configuration (see its config.yaml). "
                                "Fix: resume with the same file and --set values, or choose another run.output.",
                                dir_));
  }
  // Keep the header plus the lines of finished epochs (the epoch is CSV column `column`).
  const auto lines_up_to = [&](const char* file, int column) {
    std::istringstream in(fs::exists(fs::path(dir_) / file) ? read_file((fs::path(dir_) / file).string()) : "");
    std::string line;
    size_t kept = 0;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string field;
      for (int c = 0; c <= column; ++c) std::getline(fields, field, ',');
      if (field.empty() || std::stoi(field) > epochs_done) break;
      ++kept;
    }
    return kept;
  };
  const size_t step_lines = lines_up_to("metrics/steps.csv", 1);
  const size_t stage_lines = lines_up_to("metrics/stages.csv", 0);
  const size_t epochs = static_cast<size_t>(epochs_done);
  keep_lines(fs::path(dir_) / "metrics/steps.csv", step_lines + 1);
  keep_lines(fs::path(dir_) / "metrics/stages.csv", stage_lines + 1);
  keep_lines(fs::path(dir_) / "metrics/steps.jsonl", step_lines);
  keep_lines(fs::path(dir_) / "metrics/epochs.csv", epochs + 1);
  keep_lines(fs::path(dir_) / "metrics/epochs.jsonl", epochs);
  keep_lines(fs::path(dir_) / "log.txt", epochs);
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

void RunRecord::write_line(std::ofstream& out, const std::string& line) {
  out << line << '\n';
  out.flush();
}

void RunRecord::step(const StepMetrics& m) {
  if (log_only_) return;
  steps_csv_ << fmt::format("{},{},{},{}\n", m.step, m.epoch, json::number(m.loss), json::number(m.lr));
  steps_jsonl_ << json::Object().add("step", m.step).add("epoch", m.epoch).add("loss", m.loss).add("lr", m.lr).str() << '\n';
  const auto now = std::chrono::steady_clock::now();
  if (now - last_step_flush_ >= std::chrono::seconds(1)) {
    steps_csv_.flush();
    steps_jsonl_.flush();
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
  steps_csv_.flush();
  steps_jsonl_.flush();
  stages_csv_.flush();
  std::string csv = std::to_string(m.epoch);
  json::Object o;
  o.add("epoch", m.epoch);
  for (const auto& [name, field] : epoch_fields()) {
    csv += "," + json::number(m.*field);
    o.add(name, m.*field);
  }
  write_line(epochs_csv_, csv);
  write_line(epochs_jsonl_, o.str());
}

void RunRecord::log(const std::string& line) { write_line(log_, line); }

void RunRecord::summary(const std::string& json) {
  if (log_only_) return;
  write_file_atomic((fs::path(dir_) / "summary.json").string(), json + "\n");
}

std::string RunRecord::checkpoint_path(const std::string& name) const {
  return (fs::path(dir_) / "checkpoints" / name).string();
}

}  // namespace pipelab
