#include "tools/sweep/sweep_runner.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/config/yaml_file.h"
#include "core/io/atomic_file.h"
#include "core/io/input_file.h"
#include "core/util/error.h"
#include "core/util/names.h"
#include "core/util/progress.h"
#include "tools/sweep/run_status.h"
#include "tools/sweep/subprocess.h"

namespace fs = std::filesystem;

namespace pipelab::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// An exclusive lock on <output>/.sweep.lock while a sweep runs, so two sweeps never run
/// the same cell into the same folder at once. The kernel drops it when the process dies.
class OutputLock {
 public:
  explicit OutputLock(const std::string& output) {
    std::error_code ec;
    fs::create_directories(output, ec);
    const std::string path = (fs::path(output) / ".sweep.lock").string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw UserError(
          fmt::format("{}: cannot create the sweep's folder. Fix: check the path and permissions.", output));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw UserError(
          fmt::format("{}: another pipelab sweep is running on this folder. Fix: wait for it to end, "
                      "or set sweep.output to another folder.",
                      output));
    }
  }
  ~OutputLock() { ::close(fd_); }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  int fd_ = -1;
};

/// One line per event on `out`; on a terminal, a bar on stderr below them.
class Reporter {
 public:
  Reporter(std::ostream& out, bool bar, size_t total) : out_(out), bar_(bar), total_(total), start_(Clock::now()) {}
  ~Reporter() {
    if (bar_) std::cerr << "\r\033[K" << std::flush;
  }
  void line(size_t index, const std::string& verb, const std::string& id, const std::string& detail = "") {
    if (bar_) std::cerr << "\r\033[K" << std::flush;
    const int width = static_cast<int>(std::to_string(total_).size());
    out_ << fmt::format("[{:>{}}/{}] {:<8} {}{}", index + 1, width, total_, verb, id,
                        detail.empty() ? "" : "  " + detail)
         << std::endl;
    draw();
  }
  void message(const std::string& text) {
    if (bar_) std::cerr << "\r\033[K" << std::flush;
    out_ << text << std::endl;
    draw();
  }
  /// Redraws the bar when a count changed, else once a second (for the clock).
  void progress(int finished, int running) {
    if (finished == finished_ && running == running_ && seconds_since(last_draw_) < 1) return;
    finished_ = finished;
    running_ = running;
    draw();
  }

 private:
  void draw() {
    last_draw_ = Clock::now();
    if (!bar_) return;
    constexpr size_t kWidth = 30;
    const size_t filled = total_ ? kWidth * static_cast<size_t>(finished_) / total_ : kWidth;
    std::cerr << fmt::format("\r\033[K[{}{}] {}/{} runs, {} running, {}", std::string(filled, '#'),
                             std::string(kWidth - filled, '.'), finished_, total_, running_,
                             format_duration(seconds_since(start_)))
              << std::flush;
  }

  std::ostream& out_;
  bool bar_;
  size_t total_;
  int finished_ = 0, running_ = 0;
  Clock::time_point start_, last_draw_;
};

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

/// The last non-empty line of a file (a failed run's error message).
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

/// "test acc 83.41% (best 84.02%, epoch 9)" from a run's summary.json ("" when absent).
std::string accuracy_text(const std::string& dir) {
  const fs::path path = fs::path(dir) / "summary.json";
  if (!input_exists(path.string())) return "";
  const YAML::Node s = load_yaml_file(path.string());
  const YAML::Node acc = s.IsMap() ? s["test_acc"] : YAML::Node();
  if (!acc.IsMap() || !acc["final"] || acc["final"].IsNull()) return "";
  try {
    return fmt::format("test acc {:.2f}% (best {:.2f}%, epoch {})", acc["final"].as<double>(), acc["best"].as<double>(),
                       acc["best_epoch"].as<int>());
  } catch (const YAML::Exception&) {
    return "";  // a damaged summary: the cell's status line says so
  }
}

/// A cell's process and when it started.
struct Job {
  size_t index;
  ChildProcess child;
  Clock::time_point start;
  int epochs_reported = 0;  ///< epoch lines of metrics/epochs.csv shown, or there before it started
  Clock::time_point last_look{};
};

/// Shows the epochs a running cell finished since the last look (its metrics/epochs.csv),
/// at most once a second, so a long sweep is never silent between `start` and `done`; and
/// once more (`last`) when the cell ends, so that every epoch is shown whatever the timing.
template <class Report>
void report_epochs(Report& report, const PlannedRun& run, Job& job, bool last = false) {
  if (!last && seconds_since(job.last_look) < 1) return;
  job.last_look = Clock::now();
  std::ifstream in(fs::path(run.dir) / "metrics" / "epochs.csv");
  std::string header, line;
  if (!std::getline(in, header)) return;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || ++n <= job.epochs_reported) continue;
    const EpochProgress epoch = epoch_progress(header, line);
    report.line(job.index, "epoch " + epoch.epoch, run.id, epoch.text);
  }
  job.epochs_reported = n;
}

/// Refuses runs whose results came from another version of their cell, unless asked to
/// run them again.
void check_changed(const SweepPlan& plan, const std::vector<RunStatus>& status, const SweepRunOptions& options) {
  std::vector<std::string> changed;
  for (size_t i = 0; i < status.size(); ++i) {
    if (status[i].state == RunStatus::State::Changed) changed.push_back(plan.runs[i].id);
  }
  if (changed.empty() || options.rerun_changed) return;
  throw UserError(fmt::format(
      "{}: {} run{} hold{} results of a different version of {} cell (the sweep file changed since they ran): {}. "
      "Fix: pass --rerun-changed to run them again from scratch, restore the file, or set sweep.output to a new "
      "folder.",
      plan.output, changed.size(), changed.size() == 1 ? "" : "s", changed.size() == 1 ? "s" : "",
      changed.size() == 1 ? "its" : "their", join(changed, ", ")));
}

/// Writes the grid's order (for `pipelab table` and `plot`) and each cell's experiment file
/// before anything runs, so every run can also be repeated by hand with `pipelab run
/// <dir>/experiment.yaml`; returns the cells to run, counting the others as skipped.
std::deque<size_t> prepare_cells(const SweepPlan& plan, const std::vector<RunStatus>& status, SweepResult& result) {
  std::string order;
  for (const PlannedRun& run : plan.runs) order += fs::path(run.dir).filename().string() + "\n";
  write_file_atomic((fs::path(plan.output) / "sweep-order.txt").string(), order);
  std::deque<size_t> queue;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    if (status[i].has_result()) {
      ++result.skipped;
      continue;
    }
    const PlannedRun& run = plan.runs[i];
    fs::create_directories(run.dir);
    if (!fs::exists(run.experiment_path()) || read_file(run.experiment_path()) != run.experiment) {
      write_file_atomic(run.experiment_path(), run.experiment);
    }
    queue.push_back(i);
  }
  return queue;
}

/// The runs of one sweep: started `jobs` at a time, polled, and counted as they end.
class SweepLoop {
 public:
  SweepLoop(const SweepPlan& plan, const SweepRunOptions& options, const std::vector<RunStatus>& status, int threads,
            Reporter& report, SweepResult& result)
      : plan_(plan), options_(options), status_(status), threads_(threads), report_(report), result_(result) {}

  /// Runs `queue` to its end, or until a stop is asked (the running runs are ended, and
  /// resume with the next sweep). Returns whether it stopped.
  bool run(std::deque<size_t> queue) {
    int finished = result_.skipped;
    while (!queue.empty() || !running_.empty()) {
      if (!stopping_ && options_.stop_requested && options_.stop_requested()) stop(queue);
      while (!stopping_ && !queue.empty() && static_cast<int>(running_.size()) < options_.jobs) {
        start(queue.front());
        queue.pop_front();
      }
      for (auto it = running_.begin(); it != running_.end();) {
        report_epochs(report_, plan_.runs[it->index], *it);
        if (!it->child.poll()) {
          ++it;
          continue;
        }
        finish(*it);
        ++finished;
        it = running_.erase(it);
      }
      report_.progress(finished, static_cast<int>(running_.size()));
      if (!running_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return stopping_;
  }

 private:
  void stop(std::deque<size_t>& queue) {
    stopping_ = true;
    result_.not_started = static_cast<int>(queue.size());
    queue.clear();
    report_.message(fmt::format("stopping: ending {} running run{} (the next sweep resumes {})", running_.size(),
                                running_.size() == 1 ? "" : "s", running_.size() == 1 ? "it" : "them"));
    for (Job& job : running_) job.child.terminate();
  }

  void start(size_t i) {
    const PlannedRun& run = plan_.runs[i];
    const RunStatus::State state = status_[i].state;
    const bool rerun = state == RunStatus::State::Changed;
    std::vector<std::string> argv{options_.pipelab, "run", run.experiment_path(), rerun ? "--overwrite" : "--resume",
                                  "--quiet", "--name", run.id};
    argv.insert(argv.end(), options_.run_flags.begin(), options_.run_flags.end());
    const std::string log = (fs::path(run.dir) / "sweep.log").string();
    append_line(log, fmt::format("== {} pipelab {} (OMP_NUM_THREADS={})", now_text(),
                                 join(std::vector<std::string>(argv.begin() + 1, argv.end()), " "), threads_));
    const std::vector<std::string> env{fmt::format("OMP_NUM_THREADS={}", threads_),
                                       fmt::format("MKL_NUM_THREADS={}", threads_)};
    // A resumed run's earlier epochs are not news; a rerun starts its file again.
    running_.emplace_back(Job{i, ChildProcess(argv, env, log), Clock::now(), rerun ? 0 : status_[i].epochs});
    const bool resumed = state == RunStatus::State::Interrupted;
    report_.line(i, rerun ? "rerun" : resumed ? "resume" : "start", run.id,
                 resumed ? fmt::format("(after epoch {})", status_[i].epochs) : "");
  }

  void finish(Job& job) {
    const PlannedRun& run = plan_.runs[job.index];
    report_epochs(report_, run, job, true);
    const int code = job.child.exit_code();
    const std::string took = format_duration(seconds_since(job.start));
    const std::string summary = summary_status(run.dir);
    // Ctrl-C reaches the runs too (same process group), possibly before the sweep sees it.
    // A run killed after writing its summary has its result all the same.
    const bool signalled = code == 128 + SIGINT || code == 128 + SIGTERM;
    if (summary == "finished") {
      ++result_.done;
      report_.line(job.index, "done", run.id, fmt::format("{}  {}", accuracy_text(run.dir), took));
    } else if (summary == "diverged") {
      ++result_.diverged;
      report_.line(job.index, "DIVERGED", run.id, fmt::format("in epoch {}  {}", scan_run(run).epochs, took));
    } else if (stopping_ || signalled) {
      ++result_.interrupted;
      report_.line(job.index, "stopped", run.id, "(resumes)");
    } else {
      ++result_.failed;
      report_.line(job.index, "FAILED", run.id,
                   fmt::format("(exit {}) {}  [log: {}/sweep.log]", code, last_line(run.dir + "/sweep.log"), run.dir));
    }
  }

  const SweepPlan& plan_;
  const SweepRunOptions& options_;
  const std::vector<RunStatus>& status_;
  const int threads_;
  Reporter& report_;
  SweepResult& result_;
  std::list<Job> running_;
  bool stopping_ = false;
};

}  // namespace

std::vector<RunStatus> scan_plan(const SweepPlan& plan) {
  std::vector<RunStatus> out;
  for (const PlannedRun& run : plan.runs) out.push_back(scan_run(run));
  return out;
}

SweepResult run_sweep(const SweepPlan& plan, const SweepRunOptions& options, std::ostream& out) {
  PIPELAB_ASSERT(options.jobs >= 1, "jobs {}", options.jobs);
  const auto start = Clock::now();
  const std::vector<RunStatus> status = scan_plan(plan);
  check_changed(plan, status, options);
  OutputLock lock(plan.output);
  SweepResult result;
  std::deque<size_t> queue = prepare_cells(plan, status, result);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Half the cores shared among the jobs, as run.threads: 0 takes half the cores alone: a
  // run with every core collapses beside another busy process (core/assembly/run_builder.cpp).
  const int threads = options.threads > 0 ? options.threads : std::max(1, cores / (2 * options.jobs));
  Reporter report(out, options.bar, plan.runs.size());
  // What a run's threads are is its executor's to say (device threads x intra-op threads);
  // the sweep only sets the budget that `run.threads: 0` reads. Each run's log.txt has its layout.
  report.message(fmt::format("sweep {}: {} runs in {}/ ({} with results, {} to run), {} at a time, each with "
                             "OMP_NUM_THREADS={} (the budget run.threads: 0 takes; its log.txt says its thread layout)",
                             plan.name, plan.runs.size(), plan.output, result.skipped, queue.size(), options.jobs,
                             threads));
  const bool stopped = SweepLoop(plan, options, status, threads, report, result).run(std::move(queue));
  result.seconds = seconds_since(start);
  std::string line =
      fmt::format("sweep {}: {} done, {} skipped (had results), {} diverged, {} failed in {}", plan.name, result.done,
                  result.skipped, result.diverged, result.failed, format_duration(result.seconds));
  if (stopped) {
    line += fmt::format("; stopped with {} interrupted and {} not started: run the sweep again to complete it",
                        result.interrupted, result.not_started);
  }
  report.message(line);
  return result;
}

}  // namespace pipelab::tools
