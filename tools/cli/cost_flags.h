#pragma once
/// The flags that say where `simulate`, `plan`, `run --cluster` and `sweep` take their costs
/// from, and the CostSource they choose (tools/simulate/cost_source.h).
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/experiment/experiment.h"
#include "core/model/model.h"
#include "tools/cli/model_input.h"
#include "tools/cli/options.h"
#include "tools/simulate/cluster.h"
#include "tools/simulate/cost_source.h"

namespace pipelab::cli {

/// The flags that say where costs come from, shared by `simulate` and `plan`.
struct CostFlags {
  std::string costs_file;
  std::string cluster;  ///< --cluster: a preset's name or a cluster file
  double cluster_memory_gib = 0;  ///< the cluster's device memory (plan's default cap)
  std::string cluster_name;
  bool time_blocks = false;  ///< cost each block by timing it here
  std::string profile = "shapes";  ///< derived costs' profile: shapes or measured
  std::string dtype = "float32";
  sim::DeviceSpec device;
};

/// --costs, --device-flops, --memory-bw, --link-gbps, --link-latency-us, --host-gbps,
/// --host-latency-us, --overlap-slowdown, --dtype.
inline void add_cost_options(po::options_description& options, CostFlags& f) {
  options.add_options()("costs", po::value(&f.costs_file),
                        "costs file: a run's metrics/costs.json (measured) or a YAML file (given)")(
      "device-flops", po::value(&f.device.tflops), "derive costs: the device's achieved TFLOP/s")(
      "memory-bw", po::value(&f.device.memory_gbs), "derive costs: memory bandwidth, GB/s (0: not limiting)")(
      "link-gbps", po::value(&f.device.link.gbps), "link bandwidth between devices, Gbit/s (0: infinite)")(
      "link-latency-us", po::value(&f.device.link.latency_us)->default_value(sim::kDefaultLinkLatencyUs),
      "link latency per message, microseconds")(
      "host-gbps", po::value(&f.device.link.host_gbps),
      "bandwidth between a device and its host's memory, Gbit/s each way, which offloaded activations cross "
      "(partition.offload; 0: infinite; plan offloads only where it is given)")(
      "host-latency-us", po::value(&f.device.link.host_latency_us), "latency per copy to or from the host, microseconds")(
      "overlap-slowdown", po::value(&f.device.link.overlap_slowdown),
      "how many times slower a device computes while a message to or from it is in flight (1: overlap is free; "
      "a preset's: 1.19, Lee et al. 2025)")(
      "cluster", po::value(&f.cluster),
      "derive costs for a cluster: a preset (h100_sxm, h200, a100_sxm, a100_pcie, v100_sxm2, rtx3090, p40) or a cluster YAML file; "
      "the flags above override its values")(
      "launch-us", po::value(&f.device.launch_us)->default_value(sim::kDefaultLaunchUs),
      "derive costs: host time per kernel launched, microseconds")(
      "action-us", po::value(&f.device.action_us)->default_value(sim::kDefaultActionUs),
      "derive costs: host time per pipeline action, microseconds")(
      "dtype", po::value(&f.dtype),
      "the precision the experiment computes in, float32, bfloat16, float16 or float64: the file's (run.amp, "
      "run.dtype), which derived costs price; simulate and run refuse another, and plan plans the run in it "
      "(run.amp), which the emitted file then sets")(
      "profile", po::value(&f.profile),
      "derive costs from the model's profile: shapes (default: on the meta device, seconds for any size) or "
      "measured (run on this CPU); --time-blocks measures")(
      "time-blocks", po::bool_switch(&f.time_blocks),
      "derive costs for the devices here: time each block on this machine (run.threads intra-op threads, "
      "as each device of the threaded executor has) instead of --device-flops");
}

/// The cluster's device and links, under the flags given beside it, at the rate of `dtype`
/// (the run's compute precision).
inline void apply_cluster(const po::variables_map& vm, CostFlags& f, const std::string& dtype) {
  const sim::Cluster c = sim::load_cluster(f.cluster);
  if (!vm.count("device-flops")) {
    f.device.tflops = dtype == "float64" ? 0 : c.device.tflops.of(dtype);
    // Under float32, convolutions compute in TensorFloat-32 where the device has it (cuDNN's
    // default, and LibTorch's: at::globalContext().allowTF32CuDNN()).
    f.device.convolution_tflops = dtype == "float32" ? c.device.tflops.tf32 : 0;
    // The optimizer computes on the float32 master weights whatever the autocast.
    f.device.update_tflops = dtype == "float64" ? 0 : c.device.tflops.float32;
    if (f.device.tflops <= 0) {
      throw UsageError{fmt::format("--cluster {}: its devices ({}) have no {} rate, which the experiment computes in. "
                                   "Fix: --set run.amp=bf16 (or another precision the cluster has), or give the rate "
                                   "with --device-flops",
                                   f.cluster, c.name, dtype)};
    }
  }
  const auto unless_given = [&vm](const char* flag, double& value, double from_cluster) {
    if (vm[flag].defaulted() || !vm.count(flag)) value = from_cluster;
  };
  unless_given("memory-bw", f.device.memory_gbs, c.device.memory_gbs);
  unless_given("launch-us", f.device.launch_us, c.device.launch_us);
  unless_given("action-us", f.device.action_us, c.device.action_us);
  unless_given("link-gbps", f.device.link.gbps, c.link.gbps);
  unless_given("link-latency-us", f.device.link.latency_us, c.link.latency_us);
  f.device.link.devices_per_node = c.link.devices_per_node;
  f.device.link.inter_gbps = c.link.inter_gbps;
  f.device.link.inter_latency_us = c.link.inter_latency_us;
  unless_given("host-gbps", f.device.link.host_gbps, c.link.host_gbps);
  unless_given("host-latency-us", f.device.link.host_latency_us, c.link.host_latency_us);
  unless_given("overlap-slowdown", f.device.link.overlap_slowdown, c.link.overlap_slowdown);
  f.device.classes = c.device.classes;
  f.cluster_memory_gib = c.device.memory_gib;
  f.cluster_name = c.name;
}

/// Refuses a bad combination or value of the cost flags (UsageError). The device's rate and
/// bytes per element are the experiment's precision's (apply_precision).
inline void check_cost_flags(const po::variables_map& vm, CostFlags& f) {
  const bool derived = vm.count("device-flops") || vm.count("cluster");
  const int sources = (f.costs_file.empty() ? 0 : 1) + (derived ? 1 : 0) + (f.time_blocks ? 1 : 0);
  if (sources > 1) throw UsageError{"give one of --costs, --device-flops (or --cluster) and --time-blocks"};
  if (sources == 0) {
    throw UsageError{"give the costs: --costs FILE (measured or given), --cluster NAME|FILE or --device-flops TFLOPS "
                     "(derived), or --time-blocks (each block timed here)"};
  }
  if (vm.count("cluster")) (void)sim::load_cluster(f.cluster);  // a bad name or file fails here, before any work
  if (vm.count("device-flops")) checked_flag("--device-flops", f.device.tflops, 1e-9, 1e6);
  checked_flag("--launch-us", f.device.launch_us, 0, 1e6);
  checked_flag("--action-us", f.device.action_us, 0, 1e6);
  checked_flag("--memory-bw", f.device.memory_gbs, 0, 1e9);
  checked_flag("--link-gbps", f.device.link.gbps, 0, 1e9);
  checked_flag("--link-latency-us", f.device.link.latency_us, 0, 1e9);
  checked_flag("--host-gbps", f.device.link.host_gbps, 0, 1e9);
  checked_flag("--host-latency-us", f.device.link.host_latency_us, 0, 1e9);
  checked_flag("--overlap-slowdown", f.device.link.overlap_slowdown, 1, 10);
  if (f.dtype != "float32" && f.dtype != "bfloat16" && f.dtype != "float16" && f.dtype != "float64") {
    throw UsageError{fmt::format("--dtype {}: use float32, bfloat16, float16 or float64", f.dtype)};
  }
  if (f.profile != "shapes" && f.profile != "measured") {
    throw UsageError{fmt::format("--profile {}: use shapes or measured", f.profile)};
  }
  if (vm.count("profile") && !derived) {
    throw UsageError{"--profile goes with --device-flops or --cluster (measured costs and --time-blocks profile on this "
                     "CPU)"};
  }
}

/// The dtype experiment `e` computes in: its run.amp's (bfloat16, float16), else its
/// run.dtype's (float32, float64). Derived costs price its rate and its bytes.
inline std::string compute_dtype(const Experiment& e) {
  if (e.run.amp == Amp::Bf16) return "bfloat16";
  if (e.run.amp == Amp::Fp16) return "float16";
  return e.run.dtype == RunOptions::Dtype::Float64 ? "float64" : "float32";
}

/// The run.amp that `--dtype T` stands for (plan's knob: `--dtype bfloat16` plans the run
/// with run.amp: bf16, and the emitted file says so).
inline std::string amp_of_dtype(const std::string& dtype) {
  return dtype == "bfloat16" ? "bf16" : dtype == "float16" ? "fp16" : "none";
}

/// The experiment's precision into the cost flags: the cluster's rate and the bytes of an
/// activation (the compute dtype's) and of a weight, gradient and optimizer state (float32
/// master weights under run.amp, float64 with run.dtype: float64). A --dtype that says
/// otherwise than the file is a UsageError: the file is what runs, flags say where.
inline void apply_precision(const po::variables_map& vm, CostFlags& f, const Experiment& e) {
  const std::string dtype = compute_dtype(e);
  if (vm.count("dtype") && f.dtype != dtype) {
    throw UsageError{fmt::format("--dtype {}: the experiment computes in {} (run.amp: {}, run.dtype: {}), and the "
                                 "file is what runs. Fix: --set run.amp={} to run it in {}, or drop --dtype",
                                 f.dtype, dtype, e.run.amp == Amp::Bf16 ? "bf16" : e.run.amp == Amp::Fp16 ? "fp16" : "none",
                                 e.run.dtype == RunOptions::Dtype::Float64 ? "float64" : "float32",
                                 amp_of_dtype(f.dtype), f.dtype)};
  }
  f.dtype = dtype;
  f.device.dtype_bytes = dtype == "float64" ? 8 : dtype == "float32" ? 4 : 2;
  f.device.weight_bytes = dtype == "float64" ? 8 : 4;
  const std::optional<at::ScalarType> amp = autocast_dtype(e.run.amp);
  f.device.autocast = amp ? c10::toString(*amp) : "";
  if (vm.count("cluster")) apply_cluster(vm, f, dtype);
}

/// The autocast the experiment's stages compute under, with the policy of the devices it is
/// priced for: a cluster's GPUs, else its own run.devices; none without run.amp.
inline std::optional<sim::AutocastSpec> autocast_of(const Experiment& e, const po::variables_map& vm) {
  const std::optional<at::ScalarType> amp = autocast_dtype(e.run.amp);
  if (!amp) return std::nullopt;
  bool gpu = vm.count("cluster") > 0;
  for (const std::string& d : e.run.devices) gpu = gpu || d.rfind("cuda", 0) == 0;
  return sim::AutocastSpec{*amp, gpu ? c10::DeviceType::CUDA : c10::DeviceType::CPU};
}

/// The costs `e` is priced with under the flags in `vm`: the file given (--costs), or its
/// model profiled for `device` (derived, or timed here with --time-blocks). `known`: the
/// data's shapes where the caller has loaded it (a run), else data_spec's; `progress`: a
/// progress line while profiling. A model that cannot read the examples the flags describe
/// is blamed on those flags.
inline sim::CostSource cost_source(const Experiment& e, const po::variables_map& vm, const std::string& costs_file,
                                   const sim::DeviceSpec& device, const DataSpec* known = nullptr, bool progress = true) {
  const DataSpec spec = known ? *known : data_spec(e, vm);
  const ModelDef def = with_example_flags(vm, [&] { return e.model->define(spec); });
  sim::CostSourceOptions o;
  o.costs_file = costs_file;
  o.device = device;
  o.progress = progress;
  o.preset = vm.count("cluster") && sim::is_cluster_preset(vm["cluster"].as<std::string>());
  if (!costs_file.empty()) {
    const auto given = [&vm](const char* flag) { return vm.count(flag) > 0 && !vm[flag].defaulted(); };
    if (given("link-gbps")) o.link.gbps = device.link.gbps;
    if (given("link-latency-us")) o.link.latency_us = device.link.latency_us;
    if (given("host-gbps")) o.link.host_gbps = device.link.host_gbps;
    if (given("host-latency-us")) o.link.host_latency_us = device.link.host_latency_us;
    if (given("overlap-slowdown")) o.link.overlap_slowdown = device.link.overlap_slowdown;
    return with_example_flags(vm, [&] { return sim::CostSource(e, def, spec, o); });
  }
  dataflow(def, e.model->type());  // a malformed block list: a clear error before any block runs
  o.time_blocks = vm.count("time-blocks") && vm["time-blocks"].as<bool>();
  // The devices here are measured here; others are derived from shapes unless asked.
  o.way = o.time_blocks || (vm.count("profile") && vm["profile"].as<std::string>() == "measured")
              ? sim::ProfileWay::Measured
              : sim::ProfileWay::Shapes;
  o.autocast = autocast_of(e, vm);
  return with_example_flags(vm, [&] { return sim::CostSource(e, def, spec, o); });
}

/// `plan --tokens L` against `source`: a mean length its costs can be scaled to (a UsageError
/// naming the flag otherwise: costs of ragged text, which are means already; no sequences;
/// longer than the costs' sequences).
inline void check_mean_tokens(double tokens, const sim::CostSource& source, const std::string& model) {
  if (source.file() && source.file()->ragged) {
    throw UsageError{fmt::format("--tokens {:g}: the costs ({}) were measured on ragged text, each figure the mean over "
                                 "the run's micro-batches of differing lengths, which --tokens would scale a second "
                                 "time. Fix: drop --tokens, or use derived costs (--cluster) or a windows run's",
                                 tokens, source.file()->source)};
  }
  const double length = source.sequence_length();
  if (length < 1) {
    throw UsageError{fmt::format("--tokens {:g}: model {}'s examples are not token sequences, so there is no length to "
                                 "cost them at. Fix: drop --tokens (it is for ragged text)",
                                 tokens, model)};
  }
  if (tokens > length) {
    throw UsageError{fmt::format("--tokens {:g}: longer than the data's {:g} tokens a sequence. Fix: give the mean "
                                 "length of a step's sequences, at most {:g}",
                                 tokens, length, length)};
  }
}

}  // namespace pipelab::cli
