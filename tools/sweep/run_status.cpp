#include "tools/sweep/run_status.h"

#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/config/yaml_file.h"
#include "core/io/input_file.h"
#include "core/util/error.h"
#include "tools/sweep/key_paths.h"

namespace fs = std::filesystem;

namespace pipelab::tools {
namespace {

/// summary.json as a tree (JSON is YAML); undefined if absent. One that parses but is not
/// what pipelab writes (`{}`, wrong types) is an error too: taking it for a finished run
/// would drop the run from the sweep.
YAML::Node load_summary(const std::string& dir) {
  const fs::path path = fs::path(dir) / "summary.json";
  if (!fs::exists(path)) return YAML::Node(YAML::NodeType::Undefined);
  const auto bad = [&](const std::string& why) {
    return UserError(fmt::format("{}: not a pipelab summary ({}). Fix: delete the run's folder to run it again.",
                                 path.string(), why));
  };
  YAML::Node s;
  try {
    s = load_yaml_file(path.string());
  } catch (const UserError& e) {
    throw bad(e.what());
  }
  if (!s.IsMap()) throw bad("it is not a JSON object");
  const auto scalar = [&](const char* key) {
    if (!s[key] || !s[key].IsScalar()) throw bad(fmt::format("'{}' is missing or not a value", key));
    return s[key];
  };
  const std::string status = scalar("status").as<std::string>();
  if (status != "finished" && status != "diverged" && status != "stopped") {
    throw bad(fmt::format("'status' is '{}', not finished, diverged or stopped", status));
  }
  try {
    const int64_t epochs = scalar("epochs").as<int64_t>();
    if (epochs > 0) {
      if (!s["test_acc"] || !s["test_acc"].IsMap() || !s["test_acc"]["final"]) throw bad("'test_acc' has no 'final'");
      const YAML::Node final_acc = s["test_acc"]["final"];
      if (!final_acc.IsNull()) final_acc.as<double>();
    }
  } catch (const YAML::BadConversion&) {
    throw bad("a number is not a number");
  }
  return s;
}

/// Epoch lines in metrics/epochs.csv (the header excluded).
int recorded_epochs(const std::string& dir) {
  const std::string path = (fs::path(dir) / "metrics" / "epochs.csv").string();
  std::string text;
  try {
    if (input_exists(path)) text = read_file(path);
  } catch (const UserError&) {  // not a regular file: no epochs to count
  }
  std::istringstream in(text);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) lines += line.empty() ? 0 : 1;
  return std::max(0, lines - 1);
}

}  // namespace

std::string RunStatus::describe() const {
  switch (state) {
    case State::Finished:
      return "done";
    case State::Diverged:
      return fmt::format("diverged in epoch {}", epochs);
    case State::Interrupted:
      return fmt::format("interrupted after epoch {}", epochs);
    case State::Changed:
      return "changed since it ran";
    case State::ToDo:
      break;
  }
  return "to do";
}

std::string summary_status(const std::string& dir) {
  const YAML::Node summary = load_summary(dir);
  return summary.IsDefined() && summary["status"] ? summary["status"].as<std::string>() : "";
}

RunStatus scan_run(const PlannedRun& run) {
  RunStatus s;
  const fs::path dir(run.dir);
  const bool started = fs::exists(dir / "config.yaml") || fs::exists(dir / "summary.json");
  if (started && fs::exists(run.experiment_path()) && read_file(run.experiment_path()) != run.experiment) {
    s.state = RunStatus::State::Changed;
    return s;
  }
  s.epochs = recorded_epochs(run.dir);
  const std::string status = summary_status(run.dir);
  if (status == "diverged") {
    s.state = RunStatus::State::Diverged;
  } else if (!status.empty()) {
    s.state = RunStatus::State::Finished;
  } else if (fs::exists(dir / "checkpoints" / "state.pt")) {
    s.state = RunStatus::State::Interrupted;
  }
  return s;
}

EpochProgress epoch_progress(const std::string& header, const std::string& row) {
  std::map<std::string, std::string> v;
  std::stringstream hs(header), rs(row);
  for (std::string name; std::getline(hs, name, ',');) std::getline(rs, v[name], ',');
  // A non-finite value is written as null (core/io/json.h): it prints as nan, never as 0.
  const auto num = [&](const char* key) {
    return parse_number(v[key]).value_or(std::numeric_limits<double>::quiet_NaN());
  };
  return {v["epoch"], fmt::format("train loss {:.4f}  test acc {:.2f}%  {:.1f}s", num("train_loss"), num("test_acc"),
                                  num("seconds"))};
}

}  // namespace pipelab::tools
