/// pipelab simulate FILE [--schemes a,b:key=value,...] [--stages D] [--microbatches M]
/// [--costs COSTS | --device-flops T ...] [--slow-device r:factor] [--svg out.svg] [--trace out.json]:
/// what D devices would do with the experiment's model under each scheme, without running it.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/config/registry.h"
#include "core/config/yaml_file.h"
#include "core/io/atomic_file.h"
#include "core/model/block_costs.h"
#include "core/scheme/placed_scheme.h"
#include "core/train/run_plan.h"
#include "tools/cli/cost_source.h"
#include "tools/cli/load_experiment.h"
#include "tools/cli/model_input.h"
#include "tools/simulate/block_memory.h"
#include "tools/simulate/codec_costs.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/report.h"
#include "tools/simulate/svg_timeline.h"

namespace pipelab::cli {
namespace {

using sim::SchemeRow;

/// One entry of --schemes.
struct SchemeSpec {
  YAML::Node section;
  int stages = 0;        ///< 0: --stages
  int microbatches = 0;  ///< 0: the default M
};

/// "interleaved_1f1b:virtual_stages=2:stages=16" -> the scheme section, with `stages` and
/// `microbatches` taken out (the simulator's, not the scheme's). The file's own scheme type
/// starts from the file's section.
SchemeSpec scheme_spec(const std::string& spec, const Scheme& file_scheme, int batch) {
  const std::vector<std::string> parts = flag_list("--schemes " + spec, spec, ':');
  YAML::Node node = parts[0] == file_scheme.type() ? YAML::Clone(file_scheme.resolved()) : YAML::Node(YAML::NodeType::Map);
  node["type"] = parts[0];
  SchemeSpec out;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError{fmt::format("--schemes {}: '{}' is not key=value (e.g. gpipe:chunks=8)", spec, parts[i])};
    }
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "stages" || key == "microbatches") {
      const int most = key == "stages" ? kMaxScheduleStages : batch;
      double n = 0;
      if (!parse_finite(value, n) || n < 1 || n > most || n != std::floor(n)) {
        throw UsageError{fmt::format("--schemes {}: {} must be a whole number from 1 to {}{}", spec, key, most,
                                     key == "stages" ? "" : " (run.batch_size: a micro-batch holds at least one example)")};
      }
      (key == "stages" ? out.stages : out.microbatches) = static_cast<int>(n);
    } else {
      node[key] = parse_yaml(value, "--schemes " + spec);
    }
  }
  out.section = node;
  return out;
}

/// "2:1.5" -> device 2 computes 1.5x slower.
std::map<int, double> slow_devices(const std::vector<std::string>& given) {
  std::map<int, double> out;
  for (const std::string& g : given) {
    const size_t colon = g.find(':');
    double d = -1, f = 0;
    const bool ok = colon != std::string::npos && parse_finite(g.substr(0, colon), d) &&
                    parse_finite(g.substr(colon + 1), f) && d >= 0 && d == std::floor(d) && d < kMaxScheduleDevices &&
                    f > 0 && f <= 1e6;
    if (!ok) {
      throw UsageError{fmt::format("--slow-device {}: give DEVICE:FACTOR, a device number and a finite factor in "
                                   "(0, 1e6], e.g. 3:1.5",
                                   g)};
    }
    out[static_cast<int>(d)] = f;
  }
  return out;
}

/// On a run measured on GPUs, each GPU's caching-allocator peak against the replay: the whole
/// peaks (weights in every version, gradients, optimizer state, buffers, activations) of the
/// simulated devices whose stages it ran, summed (an upper bound when they do not coincide).
void print_gpu_check(const sim::SimCosts& f, const sim::SimResult& r) {
  const std::vector<int> placement = r.schedule.placement();
  std::map<int, std::set<int>> devices;  // GPU -> simulated devices
  std::map<int, double> measured;
  for (size_t st = 0; st < f.stages.size() && st < placement.size(); ++st) {
    const sim::StageCosts& s = f.stages[st];
    if (s.cuda_device < 0 || s.cuda_allocated_peak_bytes <= 0) continue;
    devices[s.cuda_device].insert(placement[st]);
    measured[s.cuda_device] = s.cuda_allocated_peak_bytes;
  }
  for (const auto& [gpu, simulated] : devices) {
    double predicted = 0;
    for (const int d : simulated) predicted += r.peak_bytes.at(static_cast<size_t>(d));
    fmt::print("cuda:{} (simulated device{} {}): caching allocator's peak {:.1f} MiB, predicted {:.1f} MiB with the "
               "weights, gradients and optimizer state: {:+.1f}%\n",
               gpu, simulated.size() == 1 ? "" : "s", fmt::join(simulated, ", "), measured[gpu] / (1 << 20),
               predicted / (1 << 20), 100 * (predicted - measured[gpu]) / measured[gpu]);
  }
}

/// What the allocator saw during the measured run against the replay, per device:
/// activations, temporaries and the gradients, the one being accumulated and the optimizer's
/// last (the weights and the optimizer state were allocated before the meter started). A
/// device's stages together: what each holds apart says nothing of their sum.
void print_memory_check(const sim::SimCosts& f, const sim::SimResult& r) {
  const std::vector<int> placement = r.schedule.placement();
  for (size_t d = 0; d < r.peak_activation_bytes.size(); ++d) {
    double measured = 0, gradients = 0;
    std::vector<size_t> held;
    for (size_t st = 0; st < f.stages.size() && st < placement.size(); ++st) {
      if (static_cast<size_t>(placement[st]) != d) continue;
      held.push_back(st);
      gradients += 2 * f.stages[st].parameter_bytes;
      // Files from before device peaks were measured have each stage's own peak only.
      measured = std::max(measured, f.stages[st].device_peak_bytes > 0 ? f.stages[st].device_peak_bytes
                                                                        : f.stages[st].peak_activation_bytes);
    }
    const double predicted = r.peak_activation_bytes[d] + gradients;
    if (measured <= 0) continue;
    fmt::print("device {} (stage{} {}): peak of activations, gradients and temporaries measured {:.2f} MiB, "
               "predicted {:.2f} MiB: {:+.1f}%\n",
               d, held.size() == 1 ? "" : "s", fmt::join(held, ", "), measured / (1 << 20), predicted / (1 << 20),
               100 * (predicted - measured) / measured);
  }
  print_gpu_check(f, r);
}

}  // namespace

int simulate(const Args& args) {
  po::options_description options("options");
  std::string file, schemes_text, svg, trace, markdown, executor = "devices";
  std::vector<std::string> sets, slow;
  std::string preset = kNoPreset;
  int stages = 0, micro = 0;
  CostFlags cost;
  sim::DeviceSpec& device = cost.device;
  options.add_options()("file", po::value(&file)->required(), "experiment YAML file (model, partition, scheme, batch)")(
      "set", po::value(&sets)->composing(), "override a value of the file: --set run.batch_size=256 (repeatable)")(
      "preset", po::value(&preset), kPresetHelp)(
      "schemes", po::value(&schemes_text),
      "schemes to compare, comma-separated, each NAME[:key=value...] (e.g. gpipe,zb_h1,"
      "interleaved_1f1b:virtual_stages=2:stages=16, single:microbatches=1; stages= and microbatches= set the stage "
      "and micro-batch counts for that scheme); default: the file's")(
      "stages", po::value(&stages), "model stages D (default: the file's partition.stages)")(
      "microbatches", po::value(&micro),
      "micro-batches M per mini-batch (default: the measured run's, else the file's scheme's, else each scheme's "
      "own); a scheme that is not "
      "flushed per mini-batch runs units of the same size, its step being M of them once the pipeline is full")(
      "no-overlap", "a send occupies its device until the message arrives (default: compute and links overlap)")(
      "executor", po::value(&executor),
      "devices (default: one worker per device, what D devices would do) or sequential (one thread runs every "
      "action in order, as the sequential executor: to check a sequential run's own costs against it)")(
      "slow-device", po::value(&slow)->composing(), "DEVICE:FACTOR: that device computes FACTOR times slower (repeatable)")(
      "svg", po::value(&svg), "write the timeline and memory per device as SVG (one file per scheme: out-NAME.svg)")(
      "trace", po::value(&trace), "write a Chrome trace (Perfetto, chrome://tracing) per scheme")(
      "markdown", po::value(&markdown), "also write the comparison table to this file");
  add_cost_options(options, cost);
  add_input_options(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab simulate FILE [--schemes a,b,c] [--stages D] [--microbatches M]\n"
             "                [--costs COSTS | --device-flops TFLOPS [--memory-bw GBS] [--dtype T] | --time-blocks]\n"
             "                [--link-gbps G] [--link-latency-us L] [--no-overlap] [--slow-device r:f]\n"
             "                [--svg out.svg] [--trace out.json] [--markdown out.md]\n\n"
             "Replays each scheme's schedule against a cost model and prints step time, samples/s, bubble,\n"
             "peak memory per device and bytes moved (docs/simulate.md). Costs are measured (a run's\n"
             "metrics/costs.json), given (the same keys in YAML) or derived from the model's FLOPs:\n\n"
             "  pipelab simulate exp.yaml --costs runs/exp/metrics/costs.json\n"
             "  pipelab simulate exp.yaml --schemes gpipe,pipedream_flush,zb_h1 --stages 8 --microbatches 32 \\\n"
             "      --device-flops 100 --memory-bw 3350 --link-gbps 3600 --dtype bfloat16 --input-shape 3,224,224",
             options, positional, vm)) {
    return 0;
  }
  check_output_file("--markdown", markdown);
  check_cost_flags(vm, cost);
  const std::string& costs_file = cost.costs_file;
  const std::string& dtype = cost.dtype;
  if (executor != "devices" && executor != "sequential") {
    throw UsageError{fmt::format("--executor {}: use devices or sequential", executor)};
  }
  const Experiment e = load_experiment_or_first_cell(file, with_preset(sets, preset));
  device.optimizer_states = optimizer_states(*e.optimizer);
  const CostSource source(e, vm, costs_file, device);
  if (!source.costs_of_other_model().empty()) {
    fmt::print(stderr, "note: {}; simulated as given\n", source.costs_of_other_model());
  }
  sim::SimOptions sim_options;
  sim_options.overlap = !vm.count("no-overlap");
  sim_options.slow = slow_devices(slow);
  const bool measured_sequential = source.file() && source.file()->executor == "sequential";
  sim_options.one_worker = executor == "sequential";
  if (!vm.count("stages")) stages = e.partition.stages;
  if (stages < 1 || stages > kMaxScheduleStages) {
    throw UsageError{fmt::format("--stages {}: give a number from 1 to {}", stages, kMaxScheduleStages)};
  }
  if (vm.count("microbatches") && (micro < 1 || micro > e.run.batch_size)) {
    throw UsageError{fmt::format("--microbatches {}: give a number from 1 to run.batch_size ({}): a micro-batch "
                                 "holds at least one example",
                                 micro, e.run.batch_size)};
  }

  std::vector<std::pair<std::string, std::unique_ptr<Scheme>>> schemes;
  std::vector<SchemeSpec> specs;
  // Every scheme compared runs on the file's partition.placement (client_server, a list).
  const ConfigNode placement_node(ConfigValue<Placement>::write(e.partition.placement), e.source, "partition.placement");
  const auto placed = [&](std::unique_ptr<Scheme> s) {
    return placed_scheme(std::move(s), e.partition.placement, placement_node);
  };
  for (const std::string& spec : flag_list("--schemes", schemes_text)) {
    specs.push_back(scheme_spec(spec, *e.scheme, e.run.batch_size));
    auto src = std::make_shared<ConfigSource>("--schemes " + spec);
    schemes.emplace_back(spec, placed(Registry<Scheme>::get().create(ConfigNode(specs.back().section, src, "scheme"))));
  }
  if (schemes.empty()) {
    schemes.emplace_back(e.scheme->type(), placed(Registry<Scheme>::get().create(ConfigNode(e.scheme->resolved(),
                                                                                            e.source, "scheme"))));
    specs.emplace_back();
  }
  const double batch = static_cast<double>(e.run.batch_size);
  std::vector<SchemeRow> rows;
  for (size_t i = 0; i < schemes.size(); ++i) {
    auto& [name, scheme] = schemes[i];
    SchemeRow row;
    row.name = name;
    try {
      int d = scheme->stages(specs[i].stages ? specs[i].stages : stages);
      const bool flushed = scheme->span() == Span::MiniBatch;
      const int per_step = std::max(1, scheme->micro_batches());
      // M micro-batches per mini-batch: --microbatches, else the measured run's, else the
      // file's scheme's, else the scheme's own. A scheme that is not flushed runs units of the same size (PipeDream's
      // "mini-batch" is then one of these), enough of them to reach its steady state.
      const int file_micro = e.scheme->span() == Span::MiniBatch ? e.scheme->micro_batches() : 0;
      const int measured_micro = source.file() ? source.file()->micro_batches : 0;
      const int m = specs[i].microbatches > 0 ? specs[i].microbatches
                    : micro > 0                 ? micro
                    : measured_micro > 0        ? measured_micro
                    : file_micro > 1            ? file_micro
                                                : per_step;
      const int units = flushed ? m : ((std::max(4 * d, m) + per_step - 1) / per_step) * per_step;
      // The plan `run` compiles for this scheme: copies of the whole pipeline (partition.replicas,
      // or dp's own) each taking their share, or PipeDream's replicated stages taking whole
      // mini-batches in turn; the sync (replicas' sums, a global clip, tied weights). Refused
      // where the run would refuse it, with the run's message.
      PlanRequest request = plan_request(e, d);
      request.scheme = scheme.get();
      const RunPlan plan = RunPlan::compile(request);
      const double examples = batch / m / plan.replicas();
      sim::SimCosts costs = source.costs(d, examples);
      // Costs measured with copies of stages list every copy: one pipeline's are enough.
      if (plan.layout().replicated() && costs.stages.size() == static_cast<size_t>(plan.layout().stages())) {
        costs.stages.resize(static_cast<size_t>(d));
      }
      row.result = sim::simulate(plan, units, examples, costs, sim_options, m);
    } catch (const UserError& err) {
      row.error = err.what();
    }
    rows.push_back(std::move(row));
  }
  // A slow device that no scheme has is a typo, not something to ignore.
  int most_devices = 0;
  for (const SchemeRow& row : rows) most_devices = std::max(most_devices, row.error.empty() ? row.result.devices : 0);
  for (const auto& [d, factor] : sim_options.slow) {
    if (most_devices > 0 && d >= most_devices) {
      throw UsageError{fmt::format("--slow-device {}:{:g}: no scheme here has a device {} (devices are numbered 0..{})",
                                   d, factor, d, most_devices - 1)};
    }
  }

  // Report.
  const std::string costs_line =
      source.timed() ? source.describe(dtype)
      : source.derived()
          ? fmt::format("derived: {:g} TFLOP/s, {}, {}, {} optimizer state(s) per parameter; activations "
                        "kept {}",
                        device.tflops, CostSource::memory_text(device.memory_gbs), dtype, device.optimizer_states,
                        source.memory().measured ? "measured with LibTorch's allocator" : "estimated as 2x block outputs")
          : source.file()->source;
  const sim::LinkSpec& link = source.link();
  fmt::print("{}: model {}, mini-batch {} examples\ncosts {}\nlinks {} Gbit/s, {:g} us latency{}, {}{}{}\n\n", file,
             e.model->type(), e.run.batch_size, costs_line, link.gbps > 0 ? fmt::format("{:g}", link.gbps) : "infinite",
             link.latency_us,
             link.reduce_gbps > 0 ? fmt::format(", all-reduces through memory at {:.3g} Gbit/s", link.reduce_gbps) : "",
             sim_options.overlap ? "overlapping compute" : "blocking sends",
             sim_options.one_worker ? "; one worker runs every action (--executor sequential)"
                                    : "; one worker per device (--executor devices)",
             sim_options.slow.empty() ? "" : "; slow devices given");
  const std::string table = sim::markdown_table(rows);
  fmt::print("{}\n{}", table, sim::memory_lines(rows));
  // The replay of a run's own measured costs, against what that run measured.
  const auto& f = source.file();
  if (f && measured_sequential != sim_options.one_worker) {
    fmt::print("\nthe costs were measured with the {} executor; --executor {} replays that run to compare with it\n",
               f->executor, measured_sequential ? "sequential" : "devices");
  } else if (f && f->step_seconds > 0 && rows.size() == 1 && rows[0].error.empty() &&
      schemes[0].second->type() == f->scheme &&
      (schemes[0].second->span() != Span::MiniBatch || rows[0].result.units == f->micro_batches)) {
    const double predicted = rows[0].result.step_seconds;
    fmt::print("\nmeasured step {:.3f} ms ({} steps of {} with the {} executor); predicted {:.3f} ms: {:+.1f}%\n",
               f->step_seconds * 1e3, f->steps, f->scheme, f->executor, predicted * 1e3,
               100 * (predicted - f->step_seconds) / f->step_seconds);
    print_memory_check(*f, rows[0].result);
  }
  const bool several = rows.size() > 1;
  for (const SchemeRow& row : rows) {
    if (!row.error.empty()) continue;
    if (!svg.empty()) {
      const std::string path = sim::per_scheme_path(svg, row.name, several);
      write_output(path, sim::render_timeline_svg(
                                  row.result, fmt::format("{} on {} devices, {} units: step {:.2f} ms, bubble {:.1f}%",
                                                          row.name, row.result.devices, row.result.units,
                                                          row.result.step_seconds * 1e3, 100 * row.result.bubble)));
    }
    if (!trace.empty()) {
      const std::string path = sim::per_scheme_path(trace, row.name, several);
      write_output(path, sim::simulated_trace(row.result));
    }
  }
  if (!markdown.empty()) write_output(markdown, table);
  for (const SchemeRow& row : rows) {
    if (!row.error.empty()) return 2;
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(simulate, "what D devices would do under each scheme: step time, bubble, memory, traces (no training)");
