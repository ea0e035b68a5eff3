/// pipelab launch --nproc N FILE [run options]: N local processes of one distributed run,
/// `pipelab run FILE --rank r --world-size N --master 127.0.0.1:PORT`, their output gathered
/// here line by line with a rank prefix. The first process to fail decides the exit code,
/// and the others are stopped (they also stop by themselves once they lose their peer).
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/experiment/experiment.h"
#include "core/experiment/plan_request.h"
#include "core/plan/run_plan.h"
#include "core/processes/process_group.h"
#include "tools/cli/options.h"
#include "tools/cli/stop_signals.h"
#include "tools/sweep/subprocess.h"

namespace pipelab::cli {
namespace {

/// The devices FILE's run has, from the plan the run compiles (as several processes): read
/// before any rank starts, so that `--nproc 1000` does not start 1000 processes to be told so
/// by each, and what the run refuses (replicated stages in processes) is refused here.
int plan_devices(const Experiment& e) {
  PlanRequest request = plan_request(e);
  request.several_processes = true;
  return RunPlan::compile(request).devices();
}

/// Removes the output folders of launchers that no longer run (killed with -9).
void remove_stale_launch_folders() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("pipelab-launch-", 0) != 0) continue;
    const std::string pid = name.substr(15);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
  }
}

/// Prints the lines a child appended to its output file since the last call.
class Tail {
 public:
  Tail(std::string path, std::string prefix) : path_(std::move(path)), prefix_(std::move(prefix)) {}
  void drain(bool all) {
    std::ifstream in(path_, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    pending_ += chunk;
    offset_ += chunk.size();
    for (size_t nl; (nl = pending_.find_first_of("\n\r")) != std::string::npos; pending_.erase(0, nl + 1)) {
      if (nl > 0) std::cout << prefix_ << pending_.substr(0, nl) << "\n";
    }
    if (all && !pending_.empty()) std::cout << prefix_ << pending_ << "\n", pending_.clear();
    std::cout << std::flush;
  }

 private:
  std::string path_, prefix_, pending_;
  size_t offset_ = 0;
};

/// What `pipelab run` takes from this command line, for every rank the same.
void add_run_flags(const po::variables_map& vm, const std::vector<std::string>& sets, std::vector<std::string>& argv) {
  for (const std::string& s : sets) argv.insert(argv.end(), {"--set", s});
  for (const char* flag : {"overwrite", "resume", "quiet"}) {
    if (vm.count(flag)) argv.push_back(std::string("--") + flag);
  }
  if (const int n = vm["stop-after"].as<int>(); n > 0) argv.insert(argv.end(), {"--stop-after", std::to_string(n)});
}

/// Waits for every rank, printing their output; stops the others once one fails (they would
/// lose their peer and stop within their timeout: no need to wait that long). Returns the
/// rank that failed first, -1 when none did. Of ranks that failed in the same round, one
/// with its own reason goes before one that exited 1 because it lost its peer.
int wait_for_ranks(std::vector<tools::ChildProcess>& children, std::vector<Tail>& tails) {
  int first_failure = -1;
  for (bool running = true; running;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = false;
    const bool had_failure = first_failure >= 0;
    for (size_t r = 0; r < children.size(); ++r) {
      tails[r].drain(false);
      tools::ChildProcess& c = children[r];
      if (!c.poll()) {
        running = true;
      } else if (c.exit_code() != 0 && !had_failure &&
                 (first_failure < 0 || (children[static_cast<size_t>(first_failure)].exit_code() == 1 && c.exit_code() != 1))) {
        first_failure = static_cast<int>(r);
      }
    }
    if (first_failure >= 0 || stop_requested()) {
      for (tools::ChildProcess& c : children) {
        if (!c.poll()) c.terminate();
      }
    }
  }
  return first_failure;
}

}  // namespace

int launch(const Args& args) {
  po::options_description options("options");
  std::string file;
  int nproc = 0;
  int port = 0;
  std::vector<std::string> sets;
  std::string preset = kNoPreset;
  options.add_options()("file", po::value(&file)->required(), "experiment YAML file")(
      "nproc", po::value(&nproc)->required(), "number of processes (one per device of the scheme's placement, or per group of devices)")(
      "master-port", po::value(&port)->default_value(0), "rendezvous port on 127.0.0.1 (0: a free one)")(
      "set", po::value(&sets)->composing(), "override a value, as in pipelab run (repeatable)")(
      "preset", po::value(&preset), kPresetHelp)(
      "overwrite", "replace a finished run in the output folder")(
      "resume", "continue an interrupted run from its last finished epoch, as in pipelab run")(
      "stop-after", po::value<int>()->default_value(0), "end this session after N epochs, as in pipelab run")(
      "quiet,q", "no progress bar and no per-epoch lines (the summary still shows)");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args, "pipelab launch --nproc N FILE [--set key.path=value ...] [--overwrite] [--resume] [--stop-after N]\n"
                   "                              [--quiet]\n\n"
                   "Runs FILE as one distributed run of N local processes over c10d (Gloo): rank r runs\n"
                   "devices [r*D/N, (r+1)*D/N) of the scheme's D devices (one stage each, or several:\n"
                   "docs/schedules.md). The process with the last stage writes the results to\n"
                   "run.output; the others log to run.output/ranks/rank<r>/. Output is gathered here.",
             options, positional, vm)) {
    return 0;
  }
  if (nproc < 1) throw UsageError{"--nproc must be >= 1"};
  if (vm["stop-after"].as<int>() < 0) throw UsageError{"--stop-after must be >= 0"};
  sets = with_preset(sets, preset);
  const int most = plan_devices(Experiment::load(file, sets));
  if (nproc > most) {
    throw UsageError{fmt::format("--nproc {}: {} runs on {} device{}, and each process needs one. Fix: use "
                                 "--nproc {} or fewer",
                                 nproc, file, most, most == 1 ? "" : "s", most)};
  }
  if (port < 0 || port > 65535) {
    throw UsageError{fmt::format("--master-port {}: give a TCP port from 1 to 65535, or 0 for a free one", port)};
  }
  if (port == 0) port = dist::free_port();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  remove_stale_launch_folders();
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / fmt::format("pipelab-launch-{}", ::getpid());
  std::filesystem::create_directories(tmp);
  // The ranks' output files go with this launcher, however it ends (a kill -9 leaves them
  // to the next launcher's remove_stale_launch_folders).
  struct RemoveOnExit {
    std::filesystem::path dir;
    ~RemoveOnExit() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_on_exit{tmp};
  StopOnSignals signals;
  std::vector<tools::ChildProcess> children;
  std::vector<Tail> tails;
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> argv{self, "run", file, "--rank", std::to_string(r), "--world-size", std::to_string(nproc),
                                  "--master", fmt::format("127.0.0.1:{}", port)};
    add_run_flags(vm, sets, argv);
    const std::string out = (tmp / fmt::format("rank{}.out", r)).string();
    // The ranks share this machine's cores: each takes its share of the run's thread budget.
    children.emplace_back(argv, std::vector<std::string>{fmt::format("PIPELAB_LOCAL_PROCESSES={}", nproc)}, out);
    tails.emplace_back(out, nproc > 1 ? fmt::format("[rank {}] ", r) : "");
  }
  const int first_failure = wait_for_ranks(children, tails);
  for (Tail& t : tails) t.drain(true);
  if (stop_requested()) {
    std::cerr << "pipelab launch: stopped; every rank was terminated.\n";
    return 130;
  }
  if (first_failure >= 0) {
    const int code = children[static_cast<size_t>(first_failure)].exit_code();
    std::cerr << fmt::format("pipelab launch: rank {} failed first (exit code {}); the others were stopped.\n",
                             first_failure, code);
    return code;
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(launch, "run one experiment as N local processes over c10d: pipelab launch --nproc N FILE");
