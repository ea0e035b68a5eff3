/// pipelab sweep FILE [--jobs N] [--dry-run] [--set key.path=value ...] [--preset NAME]: runs every cell of
/// the file's `sweep:` grid, each as its own `pipelab run` process.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "tools/cli/options.h"
#include "tools/cli/simulated_clock.h"
#include "tools/cli/stop_signals.h"
#include "tools/sweep/sweep_runner.h"
#include "tools/sweep/sweep_spec.h"

namespace pipelab::cli {
namespace {

std::string schema_help() {
  std::string out = "\nThe sweep: section (everything else in FILE is the base experiment of every cell):\n";
  for (const FieldInfo& f : document_options<tools::SweepOptions>()) out += fmt::format("  {:<10} {}\n", f.key, f.doc);
  return out +
         "\nExample:\n"
         "  sweep:\n"
         "    output: runs/sweeps/demo\n"
         "    grid: {scheme.type: [naive, gpipe], partition.stages: [2, 4], run.seed: [0, 1, 2]}\n"
         "    include: [{scheme.type: single, partition.stages: 1}]\n"
         "    exclude: [{scheme.type: gpipe, partition.stages: 2}]\n"
         "    overrides: [{match: {partition.stages: 4}, set: {optimizer.lr: 0.05}}]\n";
}

int dry_run(const tools::SweepPlan& plan) {
  const std::vector<tools::RunStatus> status = tools::scan_plan(plan);
  fmt::print("sweep {}: {} runs in {}/\n", plan.name, plan.runs.size(), plan.output);
  std::map<std::string, int> counts;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const std::string text = status[i].describe();
    fmt::print("  {:<26} {}\n", text, plan.runs[i].id);
    const size_t cut = std::min(text.find(" in epoch"), text.find(" after epoch"));
    ++counts[text.substr(0, cut)];
  }
  std::string line;
  for (const auto& [what, n] : counts) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", n, what);
  fmt::print("{}\n", line);
  return 0;
}

}  // namespace

int sweep(const Args& args) {
  po::options_description options("options");
  std::string file;
  std::vector<std::string> sets;
  std::string preset = kNoPreset;
  int jobs = 1, threads = 0;
  options.add_options()("file", po::value(&file)->required(), "experiment YAML file with a sweep: section")(
      "jobs,j", po::value(&jobs)->default_value(1), "runs at once")(
      "threads", po::value(&threads)->default_value(0),
      "intra-op threads per run when the file leaves run.threads at 0 (default: cores / (2 x jobs), at least 1)")(
      "dry-run,n", "list the runs and their status (done, interrupted after epoch k, to do) without running anything")(
      "set", po::value(&sets)->composing(), "override a value of the file: --set run.epochs=2 (repeatable)")(
      "preset", po::value(&preset), kPresetHelp)(
      "rerun-changed", "run again, from scratch, runs whose cell changed since they ran");
  CostFlags cost;
  const po::options_description clock = clock_options(cost);
  options.add(clock);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab sweep FILE [--jobs N] [--dry-run] [--set key.path=value ...] [--preset NAME]\n"
             "                   [--cluster NAME|FILE | --device-flops T ... | --costs COSTS | --time-blocks]\n\n"
             "Runs every cell of FILE's sweep grid as `pipelab run <cell> --resume --quiet`, N at once, each in\n"
             "<sweep.output>/<run id>/ with its experiment.yaml and sweep.log. Finished runs are skipped and\n"
             "interrupted ones resume, so running it again after Ctrl-C or a crash completes the grid.\n"
             "The cost flags go to every run: each step is also timed on those devices (`run --cluster`).\n" +
                 schema_help(),
             options, positional, vm)) {
    return 0;
  }
  if (jobs < 1) throw UsageError{"--jobs must be at least 1"};
  if (threads < 0) throw UsageError{"--threads must be >= 0"};
  const tools::SweepPlan plan = tools::plan_sweep(file, sets = with_preset(sets, preset));
  for (const std::string& line : plan.skipped) fmt::print(stderr, "note: {}\n", line);
  if (vm.count("dry-run")) return dry_run(plan);
  StopOnSignals signals;
  tools::SweepRunOptions ro;
  ro.pipelab = std::filesystem::read_symlink("/proc/self/exe").string();
  ro.jobs = jobs;
  ro.threads = threads;
  ro.rerun_changed = vm.count("rerun-changed") > 0;
  check_clock_flags(vm, clock);
  if (clock_asked(vm)) {  // a bad flag fails here, not in every cell
    check_cost_flags(vm, cost);
    check_input_flags(vm);
  }
  ro.run_flags = forwarded_clock_flags(vm, clock);
  ro.bar = ::isatty(STDERR_FILENO) != 0;
  ro.stop_requested = [] { return stop_requested(); };
  const tools::SweepResult r = tools::run_sweep(plan, ro, std::cout);
  if (r.interrupted + r.not_started > 0) return 130;
  return r.failed > 0 ? 1 : 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(sweep, "run a grid of experiments: pipelab sweep FILE [--jobs N] [--dry-run]");
