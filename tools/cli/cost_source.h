#pragma once
/// Where `pipelab simulate` takes its costs from: a costs file (a run's metrics/costs.json,
/// or one written by hand), or the model profiled once and cut per stage count, with the
/// tied weights each stage shares with another (the ALLREDUCE before each update).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/model/block_costs.h"
#include "core/model/partition.h"
#include "core/plan/run_plan.h"
#include "core/train/experiment.h"
#include "tools/cli/model_input.h"
#include "tools/cli/options.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/block_memory.h"
#include "tools/simulate/block_times.h"
#include "tools/simulate/cluster.h"
#include "tools/simulate/codec_costs.h"
#include "tools/simulate/cost_validation.h"
#include "tools/simulate/costs.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/profile_source.h"

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

/// State tensors per parameter of the file's optimizer (SGD 0, with momentum 1, Adam 2),
/// measured: one step on a tensor of 4096 values, whatever the optimizer is.
inline double optimizer_states(const OptimizerFactory& factory) {
  return factory.step_cost("", {1}).state_elements;
}

/// Costs measured with copies of stages list every copy: one pipeline's are what a replay of
/// `plan` takes.
inline void keep_one_pipeline(sim::SimCosts& costs, const RunPlan& plan) {
  if (plan.layout().replicated() && costs.stages.size() == static_cast<size_t>(plan.layout().stages())) {
    costs.stages.resize(static_cast<size_t>(plan.stages()));
  }
}

/// Where costs come from: a file, or the model profiled once and cut per stage count.
class CostSource {
 public:
  /// `known`: the data's shapes where the caller has loaded it (a run), else data_spec's;
  /// `progress`: a progress line while profiling.
  CostSource(const Experiment& e, const po::variables_map& vm, const std::string& costs_file, sim::DeviceSpec device,
             const DataSpec* known = nullptr, bool progress = true)
      : e_(e), device_(device), preset_(vm.count("cluster") && sim::is_cluster_preset(vm["cluster"].as<std::string>())) {
    if (!costs_file.empty()) {
      file_ = sim::load_costs(costs_file);
      const DataSpec spec = known ? *known : data_spec(e, vm);
      with_example_flags(vm, [&] {
        const ModelDef def = e.model->define(spec);
        other_model_ =
            other_model(*file_, def, parameter_profile(def, spec, static_cast<uint64_t>(e.run.seed)), costs_file);
        return 0;
      });
      if (vm.count("link-gbps")) file_->link.gbps = device.link.gbps;
      if (vm.count("link-latency-us") && !vm["link-latency-us"].defaulted()) file_->link.latency_us = device.link.latency_us;
      if (vm.count("host-gbps")) file_->link.host_gbps = device.link.host_gbps;
      if (vm.count("host-latency-us")) file_->link.host_latency_us = device.link.host_latency_us;
      if (vm.count("overlap-slowdown")) file_->link.overlap_slowdown = device.link.overlap_slowdown;
      return;
    }
    const DataSpec spec = known ? *known : data_spec(e, vm);
    if (spec.integer_input && spec.input_shape.size() == 1) sequence_length_ = static_cast<double>(spec.input_shape[0]);
    const ModelDef def = with_example_flags(vm, [&] { return e.model->define(spec); });
    dataflow(def, e.model->type());  // a malformed block list: a clear error before any block runs
    const bool timed = vm.count("time-blocks") && vm["time-blocks"].as<bool>();
    // The devices here are measured here; others are derived from shapes unless asked.
    const sim::ProfileWay way = timed || (vm.count("profile") && vm["profile"].as<std::string>() == "measured")
                                    ? sim::ProfileWay::Measured
                                    : sim::ProfileWay::Shapes;
    const auto seed = static_cast<uint64_t>(e.run.seed);
    const std::optional<sim::AutocastSpec> amp = autocast_of(e, vm);
    const sim::AutocastSpec* under = amp ? &*amp : nullptr;
    profile_ = with_example_flags(vm, [&] {
      return sim::profile_model(def, spec, seed, e.optimizer.get(), way,
                                sim::profile_cache_key(e.model->type(), e.model->resolved_options(), spec, seed,
                                                       e.optimizer->resolved_options(), way, under),
                                progress, under);
    });
    if (timed) {
      // The micro-batch sizes a plan tries run from the whole mini-batch down to a small
      // share of it: the two timed sizes span most of that range.
      const int batch = static_cast<int>(std::max<int64_t>(2, e.run.batch_size));
      small_ = std::max(1, batch / 16);
      large_ = std::max(small_ + 1, batch);
      times_ = sim::time_blocks(def, spec, static_cast<uint64_t>(e.run.seed), *e.optimizer, small_, large_,
                                std::max(1, e.run.threads));
      // The devices here are threads of one process: replicas sum their gradients in its
      // memory, which costs time however fast the links are said to be.
      device_.link.reduce_gbps = times_.reduce_gbps;
    }
    ties_ = tied_blocks(def, profile_.blocks);
    sim::optimizer_step_costs(profile_.blocks, *e.optimizer, profile_.memory);
  }
  bool derived() const { return !file_; }
  /// Tokens per example of the costs (0: not sequences, or unknown).
  double sequence_length() const { return file_ ? file_->sequence_length : sequence_length_; }
  bool timed() const { return !times_.empty(); }
  /// Which costs these are: what the validation figure beside them is of.
  sim::CostKind kind() const {
    if (file_) return file_->step_seconds > 0 ? sim::CostKind::Measured : sim::CostKind::Given;
    if (timed()) return sim::CostKind::Timed;
    // A preset's class rates are its own (checked against published throughput); a cluster
    // file's are what `pipelab calibrate` fitted.
    return device_.classes.given() && !preset_ ? sim::CostKind::Calibrated : sim::CostKind::Derived;
  }
  /// The line a report prints under its costs: how far costs of this kind were found from
  /// measured runs (tools/simulate/cost_validation.h).
  std::string checked() const {
    return fmt::format("checked: {}", sim::cost_validation(kind()));
  }
  /// What the costs are, for a report's header.
  std::string describe(const std::string& dtype) const {
    if (file_) return file_->source;
    if (!times_.empty()) return describe_timed();
    return fmt::format("derived{}: {:g} TFLOP/s{}, {}, {}, {:g} us per kernel and {:g} us per action, links {} "
                       "Gbit/s and {:g} us{}; {}{}",
                       device_.classes.given() ? " per operator class (the cluster's device.classes)" : "", device_.tflops,
                       device_.convolution_tflops > 0
                           ? fmt::format(" ({:g} for convolutions, in TensorFloat-32)", device_.convolution_tflops)
                           : "",
                       memory_text(device_.memory_gbs), dtype, device_.launch_us, device_.action_us,
                       device_.link.gbps > 0 ? fmt::format("{:g}", device_.link.gbps) : "unbounded",
                       device_.link.latency_us,
                       device_.link.devices_per_node > 0 && device_.link.inter_gbps > 0
                           ? fmt::format(" within nodes of {}, {:g} Gbit/s and {:g} us between", device_.link.devices_per_node,
                                         device_.link.inter_gbps, device_.link.inter_latency_us)
                           : "",
                       profile_.describe(), profile_.cached ? " (cached)" : "");
  }
  /// The header of costs timed here: the sizes, and how much slower two devices busy together
  /// run at the smallest and the largest.
  std::string describe_timed() const {
    const std::vector<int> sizes = sim::timed_sizes(small_, large_);
    std::string at;
    for (size_t i = 0; i < sizes.size(); ++i) {
      at += fmt::format("{}{}", i == 0 ? "" : i + 1 < sizes.size() ? ", " : " and ", sizes[i]);
    }
    std::string busy;
    if (!times_.busy_slowdown.empty()) {
      const sim::SizeCurve& two = times_.busy_slowdown[0];
      busy = fmt::format("; two devices busy together run {:.2f}x slower at {} examples, {:.2f}x at {}", two.at(small_),
                         small_, two.at(large_), large_);
    }
    // How much the blocks' times were scaled to the model run as a stage runs it.
    const std::string chained =
        fmt::format("; the model run as a stage runs it took {:.2f}x its blocks' forward and {:.2f}x their backward at "
                    "{} examples ({:.2f}x and {:.2f}x at {}), which scale them",
                    times_.chain_forward.at(large_), times_.chain_backward.at(large_), large_,
                    times_.chain_forward.at(small_), times_.chain_backward.at(small_), small_);
    return fmt::format("timed here: each block at {} examples, {} intra-op thread(s) per device{}{}", at, times_.threads,
                       chained, busy);
  }
  /// The device memory's bandwidth in a header: no figure is no bound, not 0 GB/s.
  static std::string memory_text(double gbs) {
    return gbs > 0 ? fmt::format("memory {:g} GB/s", gbs) : "memory bandwidth not modelled (no --memory-bw)";
  }

  /// Why the costs file is another model's ("" when its stages hold the model's parameters,
  /// at 2, 4 or 8 bytes each; a tie spanning two stages may count twice). `plan` refuses
  /// such costs, `simulate` (a what-if tool) says so and replays them. The parameters are
  /// counted from the model's profile.
  static std::string other_model(const sim::SimCosts& c, const ModelDef& def, const std::vector<BlockProfile>& blocks,
                                 const std::string& path) {
    double bytes = 0;
    for (const sim::StageCosts& k : c.stages) bytes += k.parameter_bytes;
    int64_t params = 0, tied = 0;
    for (const BlockProfile& b : blocks) params += b.parameters;
    for (const BlockTie& t : tied_blocks(def, blocks)) tied += t.elements;
    if (bytes <= 0 || params <= 0) return "";  // a costs file written by hand may leave them out
    for (const double width : {4.0, 2.0, 8.0}) {
      const double counted = bytes / width;
      if (counted >= static_cast<double>(params - tied) - 0.5 && counted <= static_cast<double>(params) + 0.5) return "";
    }
    return fmt::format(
        "--costs {}: its stages hold {:.0f} bytes of parameters ({:.0f} parameters at 4 bytes each), and the "
        "experiment's model has {} parameters: these costs were measured on another model (another width, depth "
        "or kind).\nMeasure this model (`pipelab run FILE --set run.trace=true` writes metrics/costs.json), or use "
        "derived costs (--device-flops) or --time-blocks",
        path, bytes, bytes / 4, params);
  }
  /// The blocks' parameters from shapes; measured when the meta device cannot run the model.
  static std::vector<BlockProfile> parameter_profile(const ModelDef& def, const DataSpec& spec, uint64_t seed) {
    try {
      return profile_blocks(def, spec, seed, true);
    } catch (const std::exception&) {
      return profile_blocks(def, spec, seed, false);
    }
  }
  /// other_model()'s verdict on the costs file given ("" without one, or when it matches).
  const std::string& costs_of_other_model() const { return other_model_; }

  /// A tie between two blocks' parameters: the blocks and the tensor's elements.
  struct BlockTie {
    size_t first = 0, second = 0;
    int64_t elements = 0;
  };
  /// The model's ties (ModelDef::ties, "<block>.<param>") as block indices, the tensor's
  /// size from the first block's profile.
  static std::vector<BlockTie> tied_blocks(const ModelDef& def, const std::vector<BlockProfile>& blocks) {
    std::vector<BlockTie> out;
    const auto block_of = [&def](const std::string& name) {
      for (size_t b = 0; b < def.blocks.size(); ++b) {
        if (name.rfind(def.blocks[b].name + ".", 0) == 0) return b;
      }
      return def.blocks.size();
    };
    for (const TiedParameter& tie : def.ties) {
      BlockTie t{block_of(tie.first), block_of(tie.second), 0};
      if (t.first == def.blocks.size() || t.second == def.blocks.size()) continue;
      const std::string param = tie.first.substr(def.blocks[t.first].name.size() + 1);
      for (const auto& [name, elements] : blocks.at(t.first).parameter_sizes) {
        if (name == param) t.elements = elements;
      }
      out.push_back(t);
    }
    return out;
  }
  /// The bytes each stage of `balance` holds of a tie that spans two stages.
  void add_tied_bytes(sim::SimCosts& c, const std::vector<int>& balance) const {
    const auto stage_of = [&balance](size_t block) {
      size_t end = 0;
      for (size_t p = 0; p < balance.size(); ++p) {
        end += static_cast<size_t>(balance[p]);
        if (block < end) return p;
      }
      return balance.size() - 1;
    };
    for (const BlockTie& t : ties_) {
      const size_t a = stage_of(t.first), b = stage_of(t.second);
      if (a == b) continue;
      const double bytes = static_cast<double>(t.elements) * device_.weight_bytes;
      c.stages[a].tied_bytes += bytes;
      c.stages[b].tied_bytes += bytes;
    }
  }
  const std::optional<sim::SimCosts>& file() const { return file_; }
  const sim::BlockMemory& memory() const { return profile_.memory; }

  /// Costs of `stages` stages for units of `examples` examples.
  sim::SimCosts costs(int stages, double examples) const {
    if (file_) return costs_for({}, examples);
    if (stages > static_cast<int>(profile_.blocks.size())) {
      throw UserError(fmt::format("{} stages, but the model has {} blocks. Fix: use at most {} stages", stages,
                                  profile_.blocks.size(), profile_.blocks.size()));
    }
    // The file's partition when it has this many stages, else the FLOPs-balanced cut.
    std::vector<int> balance = e_.partition.balance.kind == Balance::Kind::Counts &&
                                       static_cast<int>(e_.partition.balance.counts.size()) == stages
                                   ? e_.partition.balance.counts
                                   : balance_by_weight(with_floor(block_flops()), stages);
    return costs_for(balance, examples);
  }
  /// Costs of the stages `balance` cuts (blocks per stage) for units of `examples` examples,
  /// the file's compression section on their boundaries; a costs file's own partition
  /// whatever `balance` says.
  sim::SimCosts costs_for(const std::vector<int>& balance, double examples) const {
    return costs_for(balance, examples, e_.compression);
  }
  /// The same with `compression` on the boundaries instead (the planner's codec candidates).
  sim::SimCosts costs_for(const std::vector<int>& balance, double examples, const CompressionSection& compression) const {
    if (file_) {
      sim::SimCosts c = file_->scaled_to(examples);
      const double bytes = c.dtype == "float64" ? 8 : c.dtype == "float32" || c.dtype.empty() ? 4 : 2;
      sim::apply_compression(c, compression, bytes);
      return c;
    }
    sim::SimCosts c = sim::derive_costs(profile_.blocks, profile_.memory, balance, examples, device_, times_.empty() ? nullptr : &times_);
    c.source = times_.empty() ? "derived" : "timed here";
    c.sequence_length = sequence_length_;
    add_tied_bytes(c, balance);
    sim::apply_compression(c, compression, device_.dtype_bytes);
    return c;
  }
  /// The link between devices: the costs file's (unless a flag replaced it), or the flags'.
  const sim::LinkSpec& link() const { return file_ ? file_->link : device_.link; }
  /// Each block's forward FLOPs per example (derived costs; empty with a costs file).
  std::vector<double> block_flops() const {
    std::vector<double> flops;
    for (const BlockProfile& b : profile_.blocks) flops.push_back(static_cast<double>(b.flops));
    return flops;
  }

 private:
  const Experiment& e_;
  sim::DeviceSpec device_;
  bool preset_ = false;  ///< the cluster is a shipped preset (its classes are not a calibration)
  std::optional<sim::SimCosts> file_;
  std::string other_model_;
  sim::ModelProfile profile_;
  sim::BlockTimes times_;
  int small_ = 0, large_ = 0;  ///< the two sizes blocks were timed at
  double sequence_length_ = 0;  ///< tokens per example (0: not sequences)
  std::vector<BlockTie> ties_;
};


/// `plan --tokens L` against `source`: a mean length its costs can be scaled to (a UsageError
/// naming the flag otherwise: costs of ragged text, which are means already; no sequences;
/// longer than the costs' sequences).
inline void check_mean_tokens(double tokens, const CostSource& source, const std::string& model) {
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
