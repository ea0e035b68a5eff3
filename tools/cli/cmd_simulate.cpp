/// pipelab simulate FILE [--schemes a,b:key=value,...] [--stages D] [--microbatches M]
/// [--costs COSTS | --device-flops T ...] [--slow-device r:factor] [--svg out.svg] [--trace out.json]:
/// what D devices would do with the experiment's model under each scheme, without running it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/config/registry.h"
#include "core/config/yaml_file.h"
#include "core/experiment/plan_request.h"
#include "core/io/atomic_file.h"
#include "core/io/input_file.h"
#include "core/io/json.h"
#include "core/model/block_costs.h"
#include "core/plan/run_plan.h"
#include "core/scheme/placed_scheme.h"
#include "tools/cli/cost_flags.h"
#include "tools/cli/load_experiment.h"
#include "tools/cli/model_input.h"
#include "tools/plan/plan_report.h"
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

/// The command's flags, as given.
struct SimulateFlags {
  std::string file, schemes_text, svg, trace, markdown, json, executor = "devices", tokens;
  std::vector<std::string> sets, slow;
  std::string preset = kNoPreset;
  int stages = 0, micro = 0, cell = 0;
  CostFlags cost;
};

/// Parses the flags; false when --help was asked (and printed).
bool parse_flags(const Args& args, SimulateFlags& f, po::variables_map& vm) {
  po::options_description options("options");
  options.add_options()("file", po::value(&f.file)->required(), "experiment YAML file (model, partition, scheme, batch)")(
      "set", po::value(&f.sets)->composing(), "override a value of the file: --set run.batch_size=256 (repeatable)")(
      "preset", po::value(&f.preset), kPresetHelp)(
      "cell", po::value(&f.cell),
      "of a sweep file, the run of this number (1-based, in the order the sweep's dry run lists them; default: the "
      "first)")(
      "schemes", po::value(&f.schemes_text),
      "schemes to compare, comma-separated, each NAME[:key=value...] (e.g. gpipe,zb_h1,"
      "interleaved_1f1b:virtual_stages=2:stages=16, single:microbatches=1; stages= and microbatches= set the stage "
      "and micro-batch counts for that scheme); default: the file's")(
      "stages", po::value(&f.stages), "model stages D (default: the file's partition.stages)")(
      "microbatches", po::value(&f.micro),
      "micro-batches M per mini-batch (default: the measured run's, else the file's scheme's, else each scheme's "
      "own); a scheme that is not "
      "flushed per mini-batch runs units of the same size, its step being M of them once the pipeline is full")(
      "no-overlap", "a send occupies its device until the message arrives (default: compute and links overlap)")(
      "executor", po::value(&f.executor),
      "devices (default: one worker per device, what D devices would do), processes (the same, each device its own "
      "process, as `pipelab launch` runs it: its all-reduces gather every member's gradients) or sequential (one "
      "thread runs every action in order, as the sequential executor: to check a sequential run's own costs against "
      "it)")(
      "slow-device", po::value(&f.slow)->composing(), "DEVICE:FACTOR: that device computes FACTOR times slower (repeatable)")(
      "tokens", po::value(&f.tokens),
      "L1,L2,...: ragged text: each micro-batch's sequence length (tokens per row, cycled over the step's "
      "micro-batches); its seconds and bytes scale by it against the costs' length")(
      "svg", po::value(&f.svg), "write the timeline and memory per device as SVG (one file per scheme: out-NAME.svg)")(
      "trace", po::value(&f.trace), "write a Chrome trace (Perfetto, chrome://tracing) per scheme")(
      "markdown", po::value(&f.markdown), "also write the comparison table to this file")(
      "json", po::value(&f.json),
      "write each scheme's figures as JSON (step_seconds, samples_per_second, bubble, peak_bytes per device, "
      "bytes_per_step: the fields of plan --json)");
  add_cost_options(options, f.cost);
  add_input_options(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  return parse(args,
               "pipelab simulate FILE [--cell N] [--schemes a,b,c] [--stages D] [--microbatches M]\n"
               "                [--costs COSTS | --cluster NAME|FILE | --device-flops TFLOPS [--memory-bw GBS] [--dtype T]\n"
               "                 [--profile shapes|measured] [--launch-us U] [--action-us A] | --time-blocks]\n"
               "                [--link-gbps G] [--link-latency-us L] [--host-gbps G] [--host-latency-us L] [--overlap-slowdown F]\n"
               "                [--no-overlap] [--slow-device r:f] [--tokens L1,L2,...]\n"
               "                [--svg out.svg] [--trace out.json] [--markdown out.md] [--json out.json]\n\n"
               "Replays each scheme's schedule against a cost model and prints step time, samples/s, bubble,\n"
               "peak memory per device and bytes moved (docs/simulate.md). Costs are measured (a run's\n"
               "metrics/costs.json), given (the same keys in YAML) or derived from the model's FLOPs:\n\n"
               "  pipelab simulate exp.yaml --costs runs/exp/metrics/costs.json\n"
               "  pipelab simulate exp.yaml --schemes gpipe,pipedream_flush,zb_h1 --stages 8 --microbatches 32 \\\n"
               "      --device-flops 100 --memory-bw 3350 --link-gbps 3600 --set run.amp=bf16 --input-shape 3,224,224\n\n"
               "The file is the truth: the costs take its precision (run.amp, run.dtype), and flags only say where it\n"
               "runs. A file `pipelab plan --emit` wrote carries the plan's prediction, which this says it reproduces.",
               options, positional, vm);
}

/// The flags that need the experiment: --executor, --stages and --microbatches in range.
void check_flags(SimulateFlags& f, const po::variables_map& vm, const Experiment& e) {
  if (f.executor != "devices" && f.executor != "sequential" && f.executor != "processes") {
    throw UsageError{fmt::format("--executor {}: use devices, sequential or processes", f.executor)};
  }
  if (!vm.count("stages")) f.stages = e.partition.stages;
  if (f.stages < 1 || f.stages > kMaxScheduleStages) {
    throw UsageError{fmt::format("--stages {}: give a number from 1 to {}", f.stages, kMaxScheduleStages)};
  }
  if (vm.count("microbatches") && (f.micro < 1 || f.micro > e.run.batch_size)) {
    throw UsageError{fmt::format("--microbatches {}: give a number from 1 to run.batch_size ({}): a micro-batch "
                                 "holds at least one example",
                                 f.micro, e.run.batch_size)};
  }
}

/// One scheme to compare: its name as given, the scheme (on the file's placement) and its
/// stage and micro-batch counts.
struct Compared {
  std::string name;
  std::unique_ptr<Scheme> scheme;
  SchemeSpec spec;
};

/// --schemes, else the file's scheme; every one on the file's partition.placement.
std::vector<Compared> compared_schemes(const Experiment& e, const std::string& schemes_text) {
  const ConfigNode placement_node(ConfigValue<Placement>::write(e.partition.placement), e.source, "partition.placement");
  const auto placed = [&](std::unique_ptr<Scheme> s) {
    return placed_scheme(std::move(s), e.partition.placement, placement_node);
  };
  std::vector<Compared> out;
  for (const std::string& spec : flag_list("--schemes", schemes_text)) {
    SchemeSpec parsed = scheme_spec(spec, *e.scheme, e.run.batch_size);
    auto src = std::make_shared<ConfigSource>("--schemes " + spec);
    out.push_back({spec, placed(Registry<Scheme>::get().create(ConfigNode(parsed.section, src, "scheme"))), parsed});
  }
  if (out.empty()) {
    out.push_back({e.scheme->type(),
                   placed(Registry<Scheme>::get().create(ConfigNode(e.scheme->resolved(), e.source, "scheme"))), {}});
  }
  return out;
}

/// The micro-batches every compared scheme takes unless its own entry sets them:
/// --microbatches, else the measured run's, else the file's scheme's; 0 (each scheme's own)
/// when the file's step is not flushed per mini-batch (a pipeline that runs on counts loader
/// batches instead) or its run would refuse the plan (its own row says why).
int default_micro_batches(const Experiment& e, const sim::CostSource& source, const SimulateFlags& f) {
  if (f.micro > 0) return f.micro;
  int file_micro = 0;
  try {
    const StepShape step = RunPlan::compile(plan_request(e)).step(e.run.batch_size);
    file_micro = step.flushed ? step.micro_batches : 0;
  } catch (const UserError&) {
  }
  const int measured_micro = source.file() && file_micro > 0 ? source.file()->micro_batches : 0;
  return measured_micro > 0 ? measured_micro : file_micro > 1 ? file_micro : 0;
}

/// Replays one scheme as `run` would train it: the plan the run compiles (refused where the
/// run would refuse it, with the run's message) and its step (RunPlan::step), whose
/// micro-batches are the scheme's own `microbatches=`, else `default_micro`, else the
/// scheme's own count.
sim::SimResult replay_scheme(const Experiment& e, const sim::CostSource& source, const SimulateFlags& f, const Compared& c,
                             int default_micro, const sim::SimOptions& options) {
  const int stages = c.scheme->stages(c.spec.stages ? c.spec.stages : f.stages);
  const int m = c.spec.microbatches > 0 ? c.spec.microbatches : default_micro;
  PlanRequest request = plan_request(e, stages);
  request.scheme = c.scheme.get();
  // Where it runs: in processes, as `pipelab launch` runs it (the run's refusals included).
  if (f.executor == "processes") request.several_processes = true;
  const RunPlan plan = RunPlan::compile(request);
  const StepShape step = plan.step(e.run.batch_size, m);
  sim::SimCosts costs = source.costs(stages, step.examples_per_micro_batch);
  sim::keep_one_pipeline(costs, plan);
  return sim::simulate(plan, step, costs, options);
}

/// A slow device that no scheme has is a typo, not something to ignore.
void check_slow_devices(const std::vector<SchemeRow>& rows, const sim::SimOptions& options) {
  int most_devices = 0;
  for (const SchemeRow& row : rows) most_devices = std::max(most_devices, row.error.empty() ? row.result.devices : 0);
  for (const auto& [d, factor] : options.slow) {
    if (most_devices > 0 && d >= most_devices) {
      throw UsageError{fmt::format("--slow-device {}:{:g}: no scheme here has a device {} (devices are numbered 0..{})",
                                   d, factor, d, most_devices - 1)};
    }
  }
}

/// The lines above the table: the file, the costs, the links and the executor modelled.
void print_header(const Experiment& e, const SimulateFlags& f, const sim::CostSource& source,
                  const sim::SimOptions& options) {
  const sim::DeviceSpec& device = f.cost.device;
  const std::string costs_line =
      source.timed() ? source.describe(f.cost.dtype)
      : source.derived()
          ? fmt::format("derived{}: {:g} TFLOP/s, {}, {}, {} optimizer state(s) per parameter; activations "
                        "kept {}",
                        device.classes.given() ? " per operator class (the cluster's device.classes, docs/simulate.md, "
                                                 "\"Calibrated costs\")"
                                               : "",
                        device.tflops, sim::CostSource::memory_text(device.memory_gbs), f.cost.dtype,
                        device.optimizer_states,
                        source.memory().measured ? "measured with LibTorch's allocator" : "estimated as 2x block outputs")
          : source.file()->source;
  const sim::LinkSpec& link = source.link();
  // The host link matters only to a plan that offloads (partition.offload).
  const std::string host =
      e.request.offload.any()
          ? fmt::format(", to the host {} Gbit/s each way and {:g} us per copy (partition.offload)",
                        link.host_gbps > 0 ? fmt::format("{:g}", link.host_gbps) : "infinite", link.host_latency_us)
          : "";
  fmt::print("{}: model {}, mini-batch {} examples\ncosts {}\n{}\nlinks {} Gbit/s, {:g} us latency{}{}, {}{}{}\n\n",
             f.file, e.model->type(), e.run.batch_size, costs_line, source.checked(), link.gbps > 0 ? fmt::format("{:g}", link.gbps) : "infinite",
             link.latency_us, host,
             link.reduce_gbps > 0 ? fmt::format(", all-reduces through memory at {:.3g} Gbit/s", link.reduce_gbps) : "",
             !options.overlap               ? std::string("blocking sends")
             : link.overlap_slowdown > 1 ? fmt::format("overlapping compute, which runs {:g}x slower meanwhile", link.overlap_slowdown)
                                         : std::string("overlapping compute for free"),
             options.one_worker         ? "; one worker runs every action (--executor sequential)"
             : f.executor == "processes" ? "; one worker per device, each its own process (--executor processes)"
                                         : "; one worker per device (--executor devices)",
             options.slow.empty() ? "" : "; slow devices given");
}

/// The replay of a run's own measured costs, against what that run measured.
void print_measured_check(const sim::CostSource& source, const std::vector<Compared>& compared,
                          const std::vector<SchemeRow>& rows, const sim::SimOptions& options) {
  const auto& f = source.file();
  if (!f) return;
  const bool measured_sequential = f->executor == "sequential";
  if (measured_sequential != options.one_worker) {
    fmt::print("\nthe costs were measured with the {} executor; --executor {} replays that run to compare with it\n",
               f->executor, measured_sequential ? "sequential" : "devices");
  } else if (f->step_seconds > 0 && rows.size() == 1 && rows[0].error.empty() &&
             compared[0].scheme->type() == f->scheme &&
             (!rows[0].result.flushed || rows[0].result.units == f->micro_batches)) {
    const double predicted = rows[0].result.step_seconds;
    fmt::print("\nmeasured step {:.3f} ms ({} steps of {} with the {} executor); predicted {:.3f} ms: {:+.1f}%\n",
               f->step_seconds * 1e3, f->steps, f->scheme, f->executor, predicted * 1e3,
               100 * (predicted - f->step_seconds) / f->step_seconds);
    print_memory_check(*f, rows[0].result);
  }
}

/// Each scheme's figures as plan --json gives a candidate's.
std::string rows_json(const std::vector<SchemeRow>& rows) {
  std::vector<json::Object> out;
  for (const SchemeRow& row : rows) {
    json::Object o;
    o.add("scheme", row.name);
    if (!row.error.empty()) {
      out.push_back(o.add("error", row.error));
      continue;
    }
    const sim::SimResult& r = row.result;
    out.push_back(o.add("devices", static_cast<int64_t>(r.topology.devices))
                      .add("topology", r.topology.json())
                      .add("micro_batches", static_cast<int64_t>(r.units))
                      .add("step_seconds", r.step_seconds)
                      .add("samples_per_second", r.samples_per_second)
                      .add("bubble", r.bubble)
                      .add("peak_bytes", r.peak_bytes)
                      .add("static_bytes", r.static_bytes)
                      .add("peak_activation_bytes", r.peak_activation_bytes)
                      .add("gradient_bytes", r.gradient_bytes)
                      .add("bytes_per_step", r.bytes_per_step));
  }
  return json::Object().add("schemes", out).pretty() + "\n";
}

/// A file `plan --emit` wrote: whether this replay is, exactly, the plan its header predicted.
void print_plan_check(const SimulateFlags& f, const po::variables_map& vm, const std::vector<SchemeRow>& rows) {
  for (const char* what_if : {"schemes", "stages", "microbatches", "tokens", "slow-device", "no-overlap", "executor"}) {
    if (vm.count(what_if)) return;  // another plan than the file's
  }
  if (rows.size() != 1 || !rows[0].error.empty()) return;
  const std::string predicted = plan::predicted_plan_of(read_file(f.file));
  if (predicted.empty()) return;
  const nlohmann::json p = nlohmann::json::parse(predicted, nullptr, false);
  if (!p.is_object()) return;
  const sim::SimResult& r = rows[0].result;
  std::vector<std::string> differ;
  const auto same = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); };
  const auto compare = [&](const char* key, double now) {
    if (p.contains(key) && p[key].is_number() && !same(p[key].get<double>(), now)) {
      differ.push_back(fmt::format("{} {:.6g} (planned {:.6g})", key, now, p[key].get<double>()));
    }
  };
  compare("step_seconds", r.step_seconds);
  compare("samples_per_second", r.samples_per_second);
  compare("bubble", r.bubble);
  compare("bytes_per_step", r.bytes_per_step);
  if (p.contains("peak_bytes") && p["peak_bytes"].is_array()) {
    const std::vector<double> planned = p["peak_bytes"].get<std::vector<double>>();
    bool equal = planned.size() == r.peak_bytes.size();
    for (size_t d = 0; equal && d < planned.size(); ++d) equal = same(planned[d], r.peak_bytes[d]);
    if (!equal) differ.push_back("the devices' peaks");
  }
  if (p.contains("topology") && nlohmann::json::parse(r.topology.json().str()) != p["topology"]) {
    differ.push_back(fmt::format("the devices: {} (planned {})", r.topology.text(), p["topology"].dump()));
  }
  if (differ.empty()) {
    fmt::print("the plan in the file's header (# Predicted): reproduced exactly (devices, step, samples/s, bubble, every "
               "device's peak, bytes moved)\n");
  } else {
    fmt::print("the plan in the file's header (# Predicted): not reproduced: {}. The costs here are not the plan's "
               "(its # Costs line), or the file was changed since\n",
               fmt::join(differ, "; "));
  }
}

/// --svg, --trace, --markdown and --json.
void write_outputs(const SimulateFlags& f, const std::vector<SchemeRow>& rows, const std::string& table) {
  const bool several = rows.size() > 1;
  for (const SchemeRow& row : rows) {
    if (!row.error.empty()) continue;
    const sim::SimResult& r = row.result;
    if (!f.svg.empty()) {
      write_output(sim::per_scheme_path(f.svg, row.name, several),
                   sim::render_timeline_svg(r, fmt::format("{} on {}, {} micro-batches: step {:.2f} ms, bubble {:.1f}%",
                                                           row.name, r.topology.text(), r.units, r.step_seconds * 1e3,
                                                           100 * r.bubble)));
    }
    if (!f.trace.empty()) write_output(sim::per_scheme_path(f.trace, row.name, several), sim::simulated_trace(r));
  }
  if (!f.markdown.empty()) write_output(f.markdown, table);
  if (!f.json.empty()) write_output(f.json, rows_json(rows));
}

}  // namespace

int simulate(const Args& args) {
  SimulateFlags f;
  po::variables_map vm;
  if (!parse_flags(args, f, vm)) return 0;
  check_output_file("--markdown", f.markdown);
  check_output_file("--svg", f.svg);
  check_output_file("--trace", f.trace);
  check_output_file("--json", f.json);
  if (vm.count("tokens") && f.tokens.empty()) {
    throw UsageError{"--tokens '': no lengths. Fix: give each micro-batch's tokens per sequence, e.g. --tokens "
                     "412,388,501, or drop --tokens"};
  }
  check_cost_flags(vm, f.cost);
  if (vm.count("cell")) checked_flag("--cell", f.cell, 1, 1e9);
  const Experiment e = load_experiment_or_first_cell(f.file, with_preset(f.sets, f.preset), f.cell);
  check_flags(f, vm, e);
  apply_precision(vm, f.cost, e);
  f.cost.device.optimizer_states = sim::optimizer_states(*e.optimizer);
  const sim::CostSource source = cost_source(e, vm, f.cost.costs_file, f.cost.device);
  if (!source.costs_of_other_model().empty()) {
    fmt::print(stderr, "note: {}; simulated as given\n", source.costs_of_other_model());
  }
  sim::SimOptions options;
  options.overlap = !vm.count("no-overlap");
  options.slow = slow_devices(f.slow);
  options.one_worker = f.executor == "sequential";
  options.lengths = token_lengths(f.tokens);
  const std::vector<Compared> compared = compared_schemes(e, f.schemes_text);
  const int default_micro = default_micro_batches(e, source, f);
  std::vector<SchemeRow> rows;
  for (const Compared& c : compared) {
    SchemeRow row;
    row.name = c.name;
    try {
      row.result = replay_scheme(e, source, f, c, default_micro, options);
    } catch (const UserError& err) {
      row.error = err.what();
    }
    rows.push_back(std::move(row));
  }
  check_slow_devices(rows, options);
  print_header(e, f, source, options);
  const std::string table = sim::markdown_table(rows);
  fmt::print("{}\n{}", table, sim::memory_lines(rows));
  print_measured_check(source, compared, rows, options);
  print_plan_check(f, vm, rows);
  write_outputs(f, rows, table);
  for (const SchemeRow& row : rows) {
    if (!row.error.empty()) return 2;
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(simulate, "what D devices would do under each scheme: step time, bubble, memory, traces (no training)");
