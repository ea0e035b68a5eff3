#include "core/train/run_record.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/io/atomic_file.h"
#include "core/io/json.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace pipelab {

bool RunRecord::finished(const std::string& dir) { return fs::exists(fs::path(dir) / "summary.json"); }

void RunRecord::begin(const YAML::Node& resolved_config, bool overwrite) {
  if (finished(dir_) && !overwrite) {
    throw UserError(fmt::format("{} already holds a finished run. Fix: pass --overwrite to replace it, or choose "
                                "another folder with --set run.output=<folder>.",
                                dir_));
  }
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "metrics", ec);
  fs::create_directories(fs::path(dir_) / "checkpoints", ec);
  if (ec) throw UserError(fmt::format("{}: cannot create the run folder ({}).", dir_, ec.message()));
  for (const char* stale : {"summary.json", "metrics/steps.jsonl", "metrics/epochs.jsonl", "log.txt"}) {
    fs::remove(fs::path(dir_) / stale, ec);
  }
  YAML::Emitter out;
  out << resolved_config;
  write_file_atomic((fs::path(dir_) / "config.yaml").string(), std::string(out.c_str()) + "\n");
  write_file_atomic((fs::path(dir_) / "metrics/steps.csv").string(), "step,epoch,loss,lr\n");
  write_file_atomic((fs::path(dir_) / "metrics/epochs.csv").string(),
                    "epoch,train_loss,train_acc,test_loss,test_acc,lr,seconds,train_seconds,eval_seconds,"
                    "samples_per_second,data_wait_fraction,bytes_forward_per_step,bytes_backward_per_step\n");
  const auto open = [&](std::ofstream& out, const char* name) {
    out.open(fs::path(dir_) / name, std::ios::app | std::ios::binary);
    if (!out) throw UserError(fmt::format("{}/{}: cannot open for writing.", dir_, name));
  };
  open(steps_csv_, "metrics/steps.csv");
  open(steps_jsonl_, "metrics/steps.jsonl");
  open(epochs_csv_, "metrics/epochs.csv");
  open(epochs_jsonl_, "metrics/epochs.jsonl");
  open(log_, "log.txt");
}

void RunRecord::write_line(std::ofstream& out, const std::string& line) {
  out << line << '\n';
  out.flush();
}

void RunRecord::step(const StepMetrics& m) {
  steps_csv_ << fmt::format("{},{},{},{}\n", m.step, m.epoch, json::number(m.loss), json::number(m.lr));
  steps_jsonl_ << json::Object().add("step", m.step).add("epoch", m.epoch).add("loss", m.loss).add("lr", m.lr).str() << '\n';
  const auto now = std::chrono::steady_clock::now();
  if (now - last_step_flush_ >= std::chrono::seconds(1)) {
    steps_csv_.flush();
    steps_jsonl_.flush();
    last_step_flush_ = now;
  }
}

void RunRecord::epoch(const EpochMetrics& m) {
  steps_csv_.flush();
  steps_jsonl_.flush();
  write_line(epochs_csv_, fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}", m.epoch, json::number(m.train_loss),
                          json::number(m.train_acc), json::number(m.test_loss), json::number(m.test_acc),
                          json::number(m.lr), json::number(m.seconds), json::number(m.train_seconds),
                          json::number(m.eval_seconds), json::number(m.samples_per_second),
                          json::number(m.data_wait_fraction), json::number(m.bytes_forward_per_step),
                          json::number(m.bytes_backward_per_step)));
  write_line(epochs_jsonl_, json::Object()
                  .add("epoch", m.epoch)
                  .add("train_loss", m.train_loss)
                  .add("train_acc", m.train_acc)
                  .add("test_loss", m.test_loss)
                  .add("test_acc", m.test_acc)
                  .add("lr", m.lr)
                  .add("seconds", m.seconds)
                  .add("train_seconds", m.train_seconds)
                  .add("eval_seconds", m.eval_seconds)
                  .add("samples_per_second", m.samples_per_second)
                  .add("data_wait_fraction", m.data_wait_fraction)
                  .add("bytes_forward_per_step", m.bytes_forward_per_step)
                  .add("bytes_backward_per_step", m.bytes_backward_per_step)
                  .str());
}

void RunRecord::log(const std::string& line) { write_line(log_, line); }

void RunRecord::summary(const std::string& json) {
  write_file_atomic((fs::path(dir_) / "summary.json").string(), json + "\n");
}

std::string RunRecord::checkpoint_path(const std::string& name) const {
  return (fs::path(dir_) / "checkpoints" / name).string();
}

}  // namespace pipelab
