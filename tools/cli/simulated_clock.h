#pragma once
/// `pipelab run --cluster` (and `sweep`, which passes the flags to every cell's run): the
/// run's own compiled plan replayed on the simulator with costs for those devices, so that
/// each step is recorded with its simulated time beside the measured one
/// (docs/time-to-accuracy.md). The flags are `simulate`'s cost flags.
#include <boost/any.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/run/runner.h"
#include "core/run/simulated_clock.h"
#include "tools/cli/cost_flags.h"
#include "tools/simulate/simulate.h"

namespace pipelab::cli {

/// The cost flags, for `run` and `sweep`.
inline po::options_description clock_options(CostFlags& f) {
  po::options_description options(
      "simulated time (steps.csv's simulated_time, epochs.csv's simulated_seconds; docs/time-to-accuracy.md)");
  add_cost_options(options, f);
  // The simulated devices may run other examples than the training here: a CPU-scale run of
  // 32x32 images timed as the paper's 224x224 (docs/time-to-accuracy.md).
  add_input_options(options);
  return options;
}

/// Whether any flag asks for a simulated clock.
inline bool clock_asked(const po::variables_map& vm) {
  for (const char* flag : {"cluster", "device-flops", "costs"}) {
    if (vm.count(flag)) return true;
  }
  return vm.count("time-blocks") && vm["time-blocks"].as<bool>();
}

/// A cost or example flag given without one that asks for a clock would be ignored: a
/// UsageError naming it.
inline void check_clock_flags(const po::variables_map& vm, const po::options_description& clock) {
  if (clock_asked(vm)) return;
  for (const auto& option : clock.options()) {
    const std::string name = option->long_name();
    if (vm.count(name) && !vm[name].defaulted() && !(name == "time-blocks" && !vm[name].as<bool>())) {
      throw UsageError{fmt::format("--{} describes the simulated devices of a clock, but no flag asks for one, so it "
                                   "would be ignored. Fix: add --cluster NAME|FILE (or --device-flops, --costs, "
                                   "--time-blocks), or drop --{}",
                                   name, name)};
    }
  }
}

/// What a mini-batch of `runner`'s plan takes on the devices the flags describe: the plan
/// the run compiled, its partition and its step, replayed as `pipelab simulate` replays it.
/// `progress`: a progress line while the model is profiled.
inline SimulatedClock simulated_clock(const Experiment& e, const Runner& runner, const po::variables_map& vm,
                                      CostFlags& f, bool progress) {
  check_cost_flags(vm, f);
  apply_precision(vm, f, e);
  check_input_flags(vm);
  f.device.optimizer_states = sim::optimizer_states(*e.optimizer);
  // The run's data, unless --input-shape gives the simulated devices other examples.
  const DataSpec* spec = vm.count("input-shape") ? nullptr : &runner.data_spec();
  const sim::CostSource source = cost_source(e, vm, f.costs_file, f.device, spec, progress);
  if (!source.costs_of_other_model().empty()) throw UsageError{source.costs_of_other_model()};
  const RunPlan& plan = runner.plan();
  const StepShape step = plan.step(e.run.batch_size);
  sim::SimCosts costs = source.costs_for(runner.balance(), step.examples_per_micro_batch);
  sim::keep_one_pipeline(costs, plan);
  const sim::SimResult r = sim::simulate(plan, step, costs, sim::SimOptions{});
  if (!(r.samples_per_second > 0)) throw UsageError{"the simulated step takes no time: check the cost flags"};
  SimulatedClock clock;
  // A step of the run is one mini-batch (a pipeline that runs on takes several per update).
  clock.step_seconds = static_cast<double>(e.run.batch_size) / r.samples_per_second;
  clock.devices = r.devices;
  clock.costs = sim::cost_kind_name(source.kind());
  clock.checked = sim::cost_validation(source.kind());
  const std::string what = !f.cluster.empty() ? (std::filesystem::exists(f.cluster) ? f.cluster_name : f.cluster)
                           : source.timed()   ? std::string("devices timed here")
                           : source.derived() ? fmt::format("{:g} TFLOP/s devices", f.device.tflops)
                                              : "the costs of " + f.costs_file;
  clock.cluster =
      fmt::format("{}, {} device{}{}", what, r.devices, r.devices == 1 ? "" : "s",
                  vm.count("input-shape") ? ", examples of shape " + vm["input-shape"].as<std::string>() : "");
  const double memory = f.cluster_memory_gib * 1024.0 * 1024.0 * 1024.0;
  const auto fullest = std::max_element(r.peak_bytes.begin(), r.peak_bytes.end());
  if (memory > 0 && fullest != r.peak_bytes.end() && *fullest > memory) {
    clock.warning = fmt::format(
        "the plan needs {:.3g} GiB on device {} when replayed on {}, whose devices hold {:.3g} GiB: the simulated times "
        "are of a run that could not happen there (more stages, partition.recompute or partition.offload would fit it)",
        *fullest / (1024.0 * 1024.0 * 1024.0), fullest - r.peak_bytes.begin(), what, f.cluster_memory_gib);
  }
  return clock;
}

/// The cost flags given on this command line, to hand to each run of a sweep: a file's path
/// made absolute, since the runs may start elsewhere.
inline std::vector<std::string> forwarded_clock_flags(const po::variables_map& vm,
                                                      const po::options_description& clock) {
  std::vector<std::string> out;
  for (const auto& option : clock.options()) {
    const std::string name = option->long_name();
    if (!vm.count(name) || vm[name].defaulted()) continue;
    const boost::any& value = vm[name].value();
    if (value.empty()) {  // a switch without a value (--token-ids)
      out.push_back("--" + name);
    } else if (const auto* b = boost::any_cast<bool>(&value)) {
      if (*b) out.push_back("--" + name);
    } else if (const auto* d = boost::any_cast<double>(&value)) {
      out.insert(out.end(), {"--" + name, fmt::format("{}", *d)});
    } else if (const auto* n = boost::any_cast<int64_t>(&value)) {
      out.insert(out.end(), {"--" + name, std::to_string(*n)});
    } else if (const auto* s = boost::any_cast<std::string>(&value)) {
      const bool path = (name == "costs" || name == "cluster") && std::filesystem::exists(*s);
      out.insert(out.end(), {"--" + name, path ? std::filesystem::absolute(*s).string() : *s});
    } else {
      // A flag of a type this does not know would be dropped from every cell's run: refuse.
      throw UsageError{fmt::format("--{}: cannot be handed to the sweep's runs", name)};
    }
  }
  return out;
}

}  // namespace pipelab::cli
