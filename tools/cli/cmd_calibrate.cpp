/// pipelab calibrate RUN_DIR... -o cluster.yaml: the rates per operator class and the host
/// costs of the device the runs ran on, fitted to their traced stages (tools/simulate/
/// calibration.h), as a cluster file that `simulate --cluster` and `plan --cluster` read.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/util/memory_size.h"
#include "tools/cli/cost_flags.h"
#include "tools/cli/load_experiment.h"
#include "tools/cli/model_input.h"
#include "tools/cli/options.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/calibration.h"

namespace pipelab::cli {
namespace {

namespace fs = std::filesystem;

/// What one run gives the fit, and what must agree across runs.
struct RunSamples {
  std::vector<sim::StageSample> stages;
  std::string model;    ///< its model section, to count the models
  std::string device;   ///< the runtime and devices it ran on
  std::string dtype;    ///< the precision its products ran in
};

nlohmann::json read_json(const fs::path& path, const std::string& run) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError{fmt::format("{}: no {} in it. calibrate reads a finished run that traced its last epoch "
                                 "(run.trace: true writes metrics/costs.json)",
                                 run, path.lexically_relative(run).string())};
  }
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError{fmt::format("{}: {} is not JSON ({}). Fix: run it again", run, path.string(), e.what())};
  }
}

/// Each stage of `run`: what its blocks compute (their profile from shapes, cut as the run's
/// config.yaml cut them) and the seconds its costs.json measured.
RunSamples samples_of(const std::string& run) {
  const nlohmann::json costs = read_json(fs::path(run) / "metrics" / "costs.json", run);
  const std::string config = (fs::path(run) / "config.yaml").string();
  if (!fs::exists(config)) throw UsageError{fmt::format("{}: no config.yaml: not a run folder of pipelab run", run)};
  const Experiment e = load_experiment_or_first_cell(config, {});
  const nlohmann::json& topology = costs.at("topology");
  if (topology.at("pipelines").get<int>() != 1 || topology.at("stages_per_device").get<int>() != 1) {
    throw UsageError{fmt::format("{}: a run of {} pipelines and {} stages a device; calibrate reads runs of one "
                                 "pipeline with one stage a device (each stage's seconds its own)",
                                 run, topology.at("pipelines").get<int>(), topology.at("stages_per_device").get<int>())};
  }
  const DataSpec spec = e.dataset->load(e.data_context()).spec;
  const ModelDef def = e.model->define(spec);
  const std::vector<BlockProfile> blocks = profile_blocks_from_shapes(def, spec, static_cast<uint64_t>(e.run.seed));
  const std::vector<int>& balance = e.partition.balance.counts;
  if (balance.size() != costs.at("stages").size()) {
    throw UsageError{fmt::format("{}: its config.yaml cuts {} stages, its costs.json has {}. Fix: run it again",
                                 run, balance.size(), costs.at("stages").size())};
  }
  RunSamples out;
  out.model = YAML::Dump(e.model->resolved_options()) + e.model->type();
  out.device = fmt::format("{} on {}", load_yaml_file(config)["pipelab"]["runtime"].as<std::string>(""),
                           fmt::join(e.run.devices, ","));
  out.dtype = compute_dtype(e);
  size_t first = 0;
  for (size_t s = 0; s < balance.size(); ++s) {
    sim::StageSample x;
    x.run = run;
    for (size_t b = first; b < first + static_cast<size_t>(balance[s]); ++b) {
      for (size_t c = 0; c < kOpClasses; ++c) {
        x.flops[c] += static_cast<double>(blocks.at(b).class_flops[c]);
        x.calls[c] += static_cast<double>(blocks[b].class_calls[c]);
      }
      x.memory_bytes += static_cast<double>(blocks[b].memory_bytes);
      x.weight_bytes += 4.0 * static_cast<double>(blocks[b].parameters);
      x.kernels += static_cast<double>(blocks[b].kernels);
    }
    first += static_cast<size_t>(balance[s]);
    const nlohmann::json& k = costs.at("stages").at(s);
    x.examples = costs.at("micro_batch_size").get<double>();
    x.forward = k.at("forward").get<double>();
    x.backward = k.at("backward").get<double>();
    // What derived costs price an update by (tools/simulate/derive.cpp): the weights and their
    // gradient read, the weights written, each state read and written.
    const double weights = k.at("parameter_bytes").get<double>();
    const double states = weights > 0 ? k.at("optimizer_bytes").get<double>() / weights : 0;
    x.update_bytes = weights * (3 + 2 * states);
    x.update = k.at("update").get<double>();
    out.stages.push_back(x);
  }
  return out;
}

/// The runs' samples, checked to come from one device and precision and from two models at least.
std::vector<RunSamples> read_runs(const std::vector<std::string>& runs) {
  std::vector<RunSamples> all;
  std::set<std::string> models;
  for (const std::string& run : runs) {
    all.push_back(samples_of(run));
    models.insert(all.back().model);
    const RunSamples& first = all.front();
    if (all.back().device != first.device || all.back().dtype != first.dtype) {
      throw UsageError{fmt::format("{} ran on {} in {}, {} on {} in {}: calibrate fits one device in one precision. "
                                   "Fix: give the runs of one device and precision",
                                   runs.front(), first.device, first.dtype, run, all.back().device, all.back().dtype)};
    }
  }
  if (models.size() < 2) {
    throw UsageError{fmt::format("the runs train {} model: one model's stages cannot tell its operator classes' "
                                 "rates apart. Fix: give traced runs of at least two models (three or more to "
                                 "check one left out: tools/bench/validate_calibrate.py)",
                                 models.size())};
  }
  return all;
}

void print_fit(const sim::Calibration& fit, const sim::ClusterDevice& d, const std::vector<RunSamples>& runs) {
  const double tflops = std::max({d.tflops.float32, d.tflops.bfloat16, d.tflops.float16});
  fmt::print("class            forward: TFLOP/s   per call (us)   backward: TFLOP/s   per call (us)\n");
  for (size_t c = 0; c < kOpClasses; ++c) {
    const std::string name = op_class_name(static_cast<OpClass>(c));
    if (!fit.seen[c]) {
      fmt::print("{:<16} no run computed it: priced at the fastest rate (calibrate with a run of a model that has it)\n",
                 name);
      continue;
    }
    const sim::PassRates &f = d.classes.forward, &b = d.classes.backward;
    fmt::print("{:<16} {:>16.4g}   {:>13.3g}   {:>17.4g}   {:>13.3g}\n", name, tflops * f.compute[c], f.call_us[c],
               tflops * b.compute[c], b.call_us[c]);
  }
  fmt::print("every kernel's bytes: {:.4g} GB/s forward, {:.4g} backward; updates {:.4g} GB/s; per kernel {:.3g} us, "
             "per action {:.3g} us\n",
             d.memory_gbs * d.classes.forward.memory, d.memory_gbs * d.classes.backward.memory,
             d.memory_gbs * (d.classes.update > 0 ? d.classes.update : 1.0), d.launch_us, d.action_us);
  fmt::print("\nrun, stage: measured -> fitted forward and backward (ms)\n");
  for (const RunSamples& r : runs) {
    for (size_t s = 0; s < r.stages.size(); ++s) {
      const auto [f, b] = fit.predict(r.stages[s]);
      fmt::print("  {} stage {}: {:.3f} -> {:.3f}, {:.3f} -> {:.3f}\n", r.stages[s].run, s, r.stages[s].forward * 1e3,
                 f * 1e3, r.stages[s].backward * 1e3, b * 1e3);
    }
  }
  fmt::print("fit: {:.1f}% root mean square error over {} runs\n", 100 * fit.rms_error, runs.size());
}

}  // namespace

int calibrate(const Args& args) {
  po::options_description options("options");
  std::vector<std::string> runs;
  std::string out, name;
  double memory_gib = 0, link_gbps = 0, link_latency_us = sim::kDefaultLinkLatencyUs;
  bool one_class = false, pointwise_apart = false;
  options.add_options()("runs", po::value(&runs)->composing(), "run folders of `pipelab run` (traced)")(
      "output,o", po::value(&out)->required(), "the cluster file to write")(
      "name", po::value(&name), "the cluster's name (default: the device the runs ran on)")(
      "memory-gib", po::value(&memory_gib), "memory per device, GiB (default: this machine's)")(
      "link-gbps", po::value(&link_gbps)->default_value(1e6), "link between devices, Gbit/s (not fitted)")(
      "link-latency-us", po::value(&link_latency_us)->default_value(sim::kDefaultLinkLatencyUs),
      "latency per message, microseconds (not fitted)")(
      "one-class", po::bool_switch(&one_class),
      "one rate for every product (GEMMs, attention, convolutions alike), for comparison")(
      "pointwise-apart", po::bool_switch(&pointwise_apart),
      "fit 1 x 1 convolutions apart from the GEMMs (by default they are fitted together: the same product)");
  po::positional_options_description positional;
  positional.add("runs", -1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab calibrate RUN_DIR... -o cluster.yaml [--name N] [--memory-gib G] [--link-gbps G] [--one-class] [--pointwise-apart]\n\n"
             "Fits the device the runs ran on: each operator class's rate (GEMMs, attention, convolutions dense,\n"
             "depthwise and 1 x 1, recurrent steps), the memory-bound kernels' bandwidth and the host cost per\n"
             "kernel and per action, to the forward and backward seconds of every stage of the traced runs\n"
             "(run.trace: true; one pipeline, one stage a device; at least two models), and writes them as a\n"
             "cluster file for `simulate --cluster` and `plan --cluster` (docs/simulate.md, \"Calibrated costs\").\n"
             "The links are not fitted: give them.",
             options, positional, vm)) {
    return 0;
  }
  if (runs.empty()) throw UsageError{"give the run folders to calibrate from: pipelab calibrate RUN_DIR... -o FILE"};
  check_output_file("--output", out);
  checked_flag("--link-gbps", link_gbps, 1e-6, 1e12);
  checked_flag("--link-latency-us", link_latency_us, 0, 1e9);
  if (vm.count("memory-gib")) checked_flag("--memory-gib", memory_gib, 1.0 / 1024, 1e6);
  const std::vector<RunSamples> all = read_runs(runs);
  std::vector<sim::StageSample> samples;
  for (const RunSamples& r : all) samples.insert(samples.end(), r.stages.begin(), r.stages.end());
  sim::CalibrationOptions how;
  how.one_class = one_class;
  how.pointwise_as_gemm = !pointwise_apart;
  const sim::Calibration fit = sim::fit_calibration(samples, how);
  if (memory_gib <= 0) memory_gib = static_cast<double>(physical_memory_bytes()) / (1u << 30);
  sim::Cluster cluster;
  cluster.device = sim::calibrated_device(fit, all.front().dtype, memory_gib > 0 ? memory_gib : 1);
  cluster.name = name.empty() ? "calibrated: " + all.front().device : name;
  cluster.source = fmt::format("pipelab calibrate from {} traced runs ({} stages) in {}{}: {:.1f}% root mean square "
                               "error of the fit; links given, not fitted",
                               runs.size(), samples.size(), all.front().dtype, one_class ? ", one rate for every product" : "",
                               100 * fit.rms_error);
  cluster.link.gbps = link_gbps;
  cluster.link.latency_us = link_latency_us;
  print_fit(fit, cluster.device, all);
  write_output(out, sim::cluster_yaml(cluster));
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(calibrate, "fit a device's rates per operator class to traced runs: pipelab calibrate RUN_DIR... -o FILE");
