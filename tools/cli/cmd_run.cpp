/// pipelab run FILE [--set key.path=value ...] [--preset NAME] [--overwrite] [--quiet]
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/config/yaml_file.h"
#include "core/processes/launch_env.h"
#include "core/run/runner.h"
#include "tools/cli/options.h"
#include "tools/cli/simulated_clock.h"

namespace pipelab::cli {
namespace {

/// How the experiment (the file with the user's --set values) names a distributed executor
/// for --rank to fill in: a `{type: distributed, ...}` section, the short form
/// `executor: distributed`, or not at all.
enum class DistributedForm { None, Section, Name };

DistributedForm distributed_in(const std::string& file, const std::vector<std::string>& sets) {
  YAML::Node root = load_yaml_file(file);
  ConfigSource scratch(file);
  apply_overrides(root, sets, scratch);
  const YAML::Node executor = root.IsMap() && root["run"].IsMap() ? root["run"]["executor"] : YAML::Node();
  if (executor.IsDefined() && executor.IsScalar() && executor.Scalar() == "distributed") return DistributedForm::Name;
  if (!executor.IsDefined() || !executor.IsMap()) return DistributedForm::None;
  const YAML::Node type = executor["type"];  // a missing key reads as an invalid node: test it first
  return type.IsDefined() && type.IsScalar() && type.Scalar() == "distributed" ? DistributedForm::Section
                                                                              : DistributedForm::None;
}

/// This process's place in a multi-process run.
struct Place {
  int rank = 0;
  int world_size = 1;
  std::string master;
  /// The launcher restarted the group after a failure (torchrun --max-restarts): this
  /// attempt continues the run.
  bool restarted = false;
};

/// The flags, else the launcher's environment (torchrun's or SLURM's; core/processes/launch_env.h),
/// each flag overriding its variable; nothing for a one-process run. Processes on this
/// machine share its cores as under `pipelab launch` (PIPELAB_LOCAL_PROCESSES).
std::optional<Place> place_in_run(const po::variables_map& vm) {
  const bool flags = vm.count("rank") || vm.count("world-size");
  std::optional<dist::LaunchEnv> env;
  try {
    env = dist::launch_env();
  } catch (const UserError&) {
    // --rank and --world-size override the environment, even a launcher's that does not add
    // up (RANK=5 WORLD_SIZE=2): it is not read (the master is then --master's, or the default).
    if (!(vm.count("rank") && vm.count("world-size"))) throw;
  }
  if (!flags && !env) return std::nullopt;
  if (vm.count("rank") != vm.count("world-size") && !env) throw UsageError{"--rank and --world-size go together"};
  Place p;
  p.rank = vm.count("rank") ? vm["rank"].as<int>() : env->rank;
  p.world_size = vm.count("world-size") ? vm["world-size"].as<int>() : env->world_size;
  // Neither: the distributed executor's own default.
  p.master = vm.count("master") ? vm["master"].as<std::string>() : env ? env->master.str() : "";
  // Checked here, so that a mistake names the flag the user gave, not the --set it becomes.
  if (vm.count("master")) {
    try {
      (void)dist::Endpoint::parse(p.master, "--master");
    } catch (const UserError& e) {
      throw UsageError{e.what()};
    }
  }
  p.restarted = env && env->restart_count > 0;
  const std::string from = env ? fmt::format(" (from {}'s environment and the flags)", env->launcher) : "";
  if (p.world_size < 1) {
    throw UsageError{fmt::format("--world-size {}{}: a run has at least one process. Fix: give the number of processes "
                                 "(1 or more) with --world-size",
                                 p.world_size, from)};
  }
  if (p.rank < 0 || p.rank >= p.world_size) {
    throw UsageError{fmt::format("--rank {} of --world-size {}{}: ranks are 0 .. {}. Fix: give each process a rank "
                                 "from 0 to {}",
                                 p.rank, p.world_size, from, p.world_size - 1, p.world_size - 1)};
  }
  // One process: a plain run, whatever launched it (torchrun --nproc-per-node 1, srun -n 1,
  // --world-size 1): there is no one to meet, so no rendezvous to wait for.
  if (p.world_size == 1) return std::nullopt;
  if (env && env->local_world_size > 0) ::setenv("PIPELAB_LOCAL_PROCESSES", std::to_string(env->local_world_size).c_str(), 0);
  return p;
}

/// The --set values that make the experiment's executor this rank of `place`.
void join_run(const Place& place, const std::string& file, std::vector<std::string>& sets) {
  std::vector<std::pair<const char*, std::string>> values{{"rank", std::to_string(place.rank)},
                                                          {"world_size", std::to_string(place.world_size)}};
  if (!place.master.empty()) values.emplace_back("master", "'" + place.master + "'");
  std::string section = "type: distributed";
  for (const auto& [key, value] : values) section += fmt::format(", {}: {}", key, value);
  switch (distributed_in(file, sets)) {
    case DistributedForm::Section:
      // The file's distributed section keeps its other options (timeout_s).
      for (const auto& [key, value] : values) sets.push_back(fmt::format("run.executor.{}={}", key, value));
      break;
    case DistributedForm::Name:
      // `executor: distributed` (or --set run.executor=distributed, as docs/executors.md
      // writes it) has no options to keep: last, so that it does not replace the place.
      sets.push_back(fmt::format("run.executor={{{}}}", section));
      break;
    case DistributedForm::None:
      // First, so that a user's --set run.executor.timeout_s=... still applies on top.
      sets.insert(sets.begin(), fmt::format("run.executor={{{}}}", section));
      break;
  }
}

}  // namespace

int run(const Args& args) {
  po::options_description options("options");
  std::string file;
  std::vector<std::string> sets;
  std::string preset = kNoPreset;
  options.add_options()("file", po::value(&file)->required(), "experiment YAML file")(
      "set", po::value(&sets)->composing(), "override a value: --set optimizer.lr=0.05 (repeatable)")(
      "preset", po::value(&preset), kPresetHelp)(
      "overwrite", "replace a finished run in the output folder")(
      "resume", "continue an interrupted run in the output folder from its last finished epoch")(
      "stop-after", po::value<int>()->default_value(0), "end this session after N epochs; continue later with --resume")(
      "dump-batches", po::value<int64_t>()->default_value(0),
      "write the first N steps' micro-batches as the stages read them (inputs, targets, document layout, example "
      "ids) to <run.output>/batches.safetensors, keys step<S>.mb<M>.<x|y|documents|example_ids>")(
      "quiet,q", "no progress bar and no per-epoch lines (the summary still shows)")(
      "name", po::value<std::string>(),
      "the run's title in its summary (default: the file's name; for a sweep cell's experiment.yaml, its folder's: "
      "the run id the sweep gives it)")(
      "rank", po::value<int>(), "join a multi-process run as this rank (with --world-size and --master)")(
      "world-size", po::value<int>(), "number of processes of the multi-process run")(
      "master", po::value<std::string>(),
      "host:port of the rendezvous store, served by rank 0 (default: the launcher's MASTER_ADDR:MASTER_PORT, else "
      "run.executor.master, 127.0.0.1:29500 unless set)");
  CostFlags cost;
  const po::options_description clock = clock_options(cost);
  options.add(clock);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab run FILE [--set key.path=value ...] [--preset NAME] [--overwrite] [--resume] [--stop-after N] "
             "[--quiet]\n"
             "                 [--dump-batches N]\n"
             "                 [--rank R --world-size N --master HOST:PORT]\n"
             "                 [--cluster NAME|FILE | --device-flops T ... | --costs COSTS | --time-blocks]\n\n"
             "Trains the experiment in FILE and writes its results to run.output\n"
             "(config.yaml, metrics/, summary.json, checkpoints/). With --rank, this process is one\n"
             "rank of a multi-process run over c10d (run.executor becomes `distributed`); start\n"
             "every rank the same way, or let `pipelab launch --nproc N FILE` do it. Without --rank,\n"
             "the environment of torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or of SLURM's\n"
             "srun (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST) places it the same way; flags\n"
             "override the environment. After torchrun restarts a failed group, the run resumes.\n"
             "With --cluster (or simulate's other cost flags), every step is also timed on those devices\n"
             "by replaying the run's plan: steps.csv's simulated_time, epochs.csv's simulated_seconds,\n"
             "and summary.json's time_to_target for run.targets (docs/time-to-accuracy.md).",
             options, positional, vm)) {
    return 0;
  }
  check_clock_flags(vm, clock);
  const std::optional<Place> place = place_in_run(vm);
  sets = with_preset(sets, preset);
  if (place) join_run(*place, file, sets);
  Experiment experiment = Experiment::load(file, sets);
  if (vm.count("name")) {
    experiment.name = vm["name"].as<std::string>();
  } else if (std::filesystem::path(file).filename() == "experiment.yaml") {
    // What `pipelab sweep` writes into each cell's folder: run alone, it keeps the title the
    // sweep gives it (the folder's name, its run id) rather than "experiment".
    const std::string folder = std::filesystem::absolute(file).parent_path().filename().string();
    if (!folder.empty()) experiment.name = folder;
  }
  RunnerOptions ro;
  ro.overwrite = vm.count("overwrite") > 0;
  ro.quiet = vm.count("quiet") > 0;
  ro.resume = vm.count("resume") > 0 || (place && place->restarted);
  ro.stop_after = vm["stop-after"].as<int>();
  if (ro.stop_after < 0) throw UsageError{"--stop-after must be >= 0"};
  ro.dump_batches = vm["dump-batches"].as<int64_t>();
  if (ro.dump_batches < 0) throw UsageError{fmt::format("--dump-batches {}: give a number of steps, 0 or more", ro.dump_batches)};
  if (ro.dump_batches > 0 && !experiment.executor->world().process_name().empty()) {
    throw UsageError{"--dump-batches records the batches where every stage reads them, in one process: use run.executor "
                     "sequential or threaded for the dump (the numbers are the same)"};
  }
  Runner runner(experiment, ro);
  if (clock_asked(vm))
    runner.simulate_on(simulated_clock(experiment, runner, vm, cost, !ro.quiet && experiment.run.progress));
  try {
    const RunSummary summary = runner.run();
    return summary.status == "diverged" ? 3 : 0;
  } catch (const WriteError& e) {
    // Every finished epoch is on disk; the run continues from the last one.
    throw WriteError(fmt::format("{} Then continue with `pipelab run {} --resume` (the same --set values).", e.what(),
                                 file));
  }
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(run, "train one experiment file: pipelab run FILE [--set key.path=value ...]");
