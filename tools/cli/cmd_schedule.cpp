/// pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D]
/// [--microbatches M] [--virtual-stages v] [--costs F,B,W] [--lowered] [--csv OUT]: the per-device action
/// lists, a clock-cycle grid, the bubble and the peak in-flight micro-batches of a scheme,
/// without running anything. The scheme comes from an experiment file's scheme section (and
/// its partition.stages), from --scheme, or both, with --set overrides, so options such as
/// interlocking's mode or GPipe's chunks can be drawn.
#include <fmt/format.h>

#include <algorithm>

#include "core/config/config_node.h"
#include "core/config/value.h"
#include "core/config/yaml_file.h"
#include "core/io/atomic_file.h"
#include "core/model/model.h"
#include "core/model/partition.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/scheme/placed_scheme.h"
#include "core/scheme/replicas.h"
#include "core/train/optimizer_section.h"
#include "core/train/run_plan.h"
#include "tools/cli/options.h"

namespace pipelab::cli {
namespace {

/// "1,1,1" -> {F, B, W}; B is the input-gradient half of a backward (the zero-bubble
/// papers' B, our I), W the weights' half, so a whole B costs B + W.
std::vector<double> parse_costs(const std::string& text) {
  const auto bad = [&] {
    return UsageError{fmt::format("--costs {}: give three finite numbers F,B,W with 1e-9 <= F, B <= 1e6 and 0 <= W <= "
                                  "1e6, e.g. --costs 1,1,1",
                                  text)};
  };
  std::vector<double> out;
  for (const std::string& item : flag_list("--costs", text)) {
    double v = 0;
    if (!parse_finite(item, v)) throw bad();
    out.push_back(v);
  }
  if (out.size() != 3 || out[0] < 1e-9 || out[1] < 1e-9 || out[2] < 0 || *std::max_element(out.begin(), out.end()) > 1e6) {
    throw bad();
  }
  return out;
}

/// The most actions `pipelab schedule` lays out (stages x micro-batches), so that a typo
/// cannot ask for gigabytes; generation and validation are O(n log n) below it.
constexpr int64_t kMaxCells = 1'000'000;

/// partition.stages of the experiment file, if it sets one.
/// The file's partition.<key> (0 when it has none).
int file_partition(const YAML::Node& root, const std::shared_ptr<ConfigSource>& source, const char* key) {
  if (!root.IsMap() || !root["partition"] || !root["partition"].IsMap() || !root["partition"][key]) return 0;
  const ConfigNode n(root["partition"][key], source, std::string("partition.") + key);
  const int v = ConfigValue<int>::read(n);
  if (v < 1 || v >= kMaxScheduleStages) {
    n.fail(fmt::format("must be a number from 1 to {}, got {}", kMaxScheduleStages - 1, v),
           fmt::format("set partition.{} to a count", key));
  }
  return v;
}

/// The file's per-stage replica counts (`partition.replicas: [2, 1, 1]`, PipeDream's
/// replicated stages; empty when it has one count or none, or equal ones).
std::vector<int> file_stage_replicas(const YAML::Node& root, const std::shared_ptr<ConfigSource>& source) {
  if (!root.IsMap() || !root["partition"] || !root["partition"].IsMap() || !root["partition"]["replicas"]) return {};
  const YAML::Node n = root["partition"]["replicas"];
  if (!n.IsSequence()) return {};
  return ConfigValue<Replicas>::read(ConfigNode(n, source, "partition.replicas")).per_stage;
}

/// The heading's words for the plan's layout: " x 2 replicas" and how stages are numbered.
std::pair<std::string, std::string> layout_words(const RunPlan& plan) {
  if (!plan.layout().uniform()) {
    const std::vector<int>& counts = plan.layout().counts();
    return {fmt::format(" with replicated stages {}", shape_text(std::vector<int64_t>(counts.begin(), counts.end()))),
            " dealt round robin to each stage's replicas (PipeDream's 1F1B-RR; stages numbered replica by replica; "
            "ALLREDUCE averages a stage's replicas)"};
  }
  if (plan.replicas() == 1) return {"", ""};
  return {fmt::format(" x {} replicas", plan.replicas()),
          " per replica (replica r's stage p is stage r*D+p; ALLREDUCE sums a stage's replicas)"};
}

/// Whether the file's model ties weights (the ALLREDUCE it adds is drawn): its section read as
/// `run` reads it, without its data.
bool file_model_ties(const ConfigNode& top) {
  return top.has("model") && Registry<ModelFactory>::get().create(top.child("model"))->ties_weights();
}

/// Whether the file's model computes sequences segment by segment (what a scheme that cuts
/// them needs); without a model section, the schedule is drawn as the scheme makes it.
std::optional<double> file_segment_token_work(const ConfigNode& top) {
  if (!top.has("model")) return 0.0;
  return Registry<ModelFactory>::get().create(top.child("model"))->segment_token_work();
}

/// Whether the file's run goes over several processes (replicated stages refuse it).
bool file_runs_processes(const YAML::Node& root) {
  if (!root.IsMap() || !root["run"] || !root["run"].IsMap() || !root["run"]["executor"]) return false;
  const YAML::Node executor = root["run"]["executor"];
  const YAML::Node type = executor.IsMap() && executor["type"] ? executor["type"] : executor;
  return type.IsScalar() && type.Scalar() == "distributed";
}

/// The experiment to draw: FILE (a sweep's base) or an empty one, with --scheme,
/// --virtual-stages (0: not given) and the --set overrides applied.
YAML::Node drawn_experiment(const std::string& file, const std::string& scheme_name, int virtual_stages,
                            const std::vector<std::string>& sets, ConfigSource& source) {
  YAML::Node root = file.empty() ? YAML::Node(YAML::NodeType::Map) : load_yaml_file(file);
  if (root.IsMap()) root.remove("sweep");  // a sweep file's base experiment
  const auto scheme = [&] {
    if (!root["scheme"] || !root["scheme"].IsMap()) root["scheme"] = YAML::Node(YAML::NodeType::Map);
    return root["scheme"];
  };
  if (!scheme_name.empty()) scheme()["type"] = scheme_name;
  if (virtual_stages != 0) scheme()["virtual_stages"] = virtual_stages;
  apply_overrides(root, sets, source);
  return root;
}

/// The clock-cycle grid (whole-number costs, short schedules), the costs, the bubble and each
/// device's idle time and peak in-flight micro-batches.
void print_timeline(const Schedule& s, const Timeline& t, const std::vector<double>& costs) {
  bool whole = true;
  for (const double c : costs) whole = whole && c == static_cast<int>(c);
  if (whole && t.makespan <= 200) {
    fmt::print("time ->  (one column per unit; '=' continues an action, '*' = optimizer step after it, '.' = idle)\n{}\n",
               render_grid(t));
  }
  fmt::print("costs F = {:g}, B = {:g}, W = {:g} (a whole backward B+W = {:g}); makespan {:g} units\n", costs[0], costs[1],
             costs[2], costs[1] + costs[2], t.makespan);
  fmt::print("bubble fraction {:.4f} ({:.1f}% of device time idle)\n", t.bubble_fraction, 100 * t.bubble_fraction);
  fmt::print("device  idle units  peak in-flight micro-batches\n");
  for (int k = 0; k < s.devices(); ++k) {
    fmt::print("{:>6}  {:>10g}  {:>28}\n", fmt::format("d{}", k), t.makespan - t.busy[static_cast<size_t>(k)],
               t.peak_in_flight[static_cast<size_t>(k)]);
  }
}

}  // namespace

int schedule(const Args& args) {
  po::options_description options("options");
  std::string file, scheme_name, costs_text = "1,1,1";
  std::vector<std::string> sets;
  std::string preset = kNoPreset;
  int stages = 4, micro = 8, virtual_stages = 0, replicas = 1;
  bool lowered = false;
  std::string csv;
  options.add_options()("file", po::value(&file), "experiment file: its scheme section and partition.stages")(
      "scheme", po::value(&scheme_name), "registered scheme (pipelab list scheme); replaces the file's scheme type")(
      "set", po::value(&sets)->composing(), "override a value: --set scheme.mode=local (repeatable)")(
      "preset", po::value(&preset), kPresetHelp)(
      "stages", po::value(&stages), "model stages (default: the file's partition.stages, else 4)")(
      "microbatches", po::value(&micro),
      "micro-batches of one run: micro-batched schemes default to their chunks; 1F1B and interlocking schemes run "
      "one epoch's mini-batches (default 8)")(
      "virtual-stages", po::value(&virtual_stages), "stages per device, for schemes with virtual_stages (sets it)")(
      "replicas", po::value(&replicas),
      "copies of the pipeline, each on its own devices and micro-batches, all-reducing each stage's gradients "
      "before its update (default: the file's partition.replicas, else 1)")(
      "costs", po::value(&costs_text),
      "F,B,W durations (default 1,1,1): F forward, B the input-gradient part of a backward, W the weights' part; a "
      "whole backward costs B+W and an auxiliary head's H half of that (whole numbers draw a grid)")(
      "lowered", po::bool_switch(&lowered), "also print the schedule with its SEND/RECV actions")(
      "csv", po::value(&csv),
      "also write the schedule as torch.distributed.pipelining's compute-only CSV (what its _load_csv reads)");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D] [--microbatches M]\n"
             "                 [--virtual-stages v] [--replicas R] [--costs F,B,W] [--lowered] [--csv OUT]\n\n"
             "  pipelab schedule --scheme gpipe --set scheme.chunks=4 --stages 4\n"
             "  pipelab schedule --scheme zb_h1 --stages 4 --microbatches 8\n"
             "  pipelab schedule --scheme interleaved_1f1b --stages 4 --virtual-stages 2 --microbatches 8\n"
             "  pipelab schedule --scheme gpipe --stages 2 --replicas 2 --microbatches 4\n"
             "  pipelab schedule --scheme custom --set scheme.file=experiments/schedules/1f1b_d2_m4.sched\n"
             "  pipelab schedule experiments/quickstart.yaml",
             options, positional, vm)) {
    return 0;
  }
  if (file.empty() && scheme_name.empty()) throw UsageError{"give an experiment FILE or --scheme NAME"};
  check_output_file("--csv", csv);
  const std::vector<double> costs = parse_costs(costs_text);
  auto source = std::make_shared<ConfigSource>(file.empty() ? "--scheme" : file);
  YAML::Node root = drawn_experiment(file, scheme_name, vm.count("virtual-stages") ? virtual_stages : 0, with_preset(sets, preset), *source);
  const ConfigNode top(root, source, "");
  top.expect_map("an experiment");
  if (!top.has("scheme")) top.fail("no scheme section", "add `scheme: {type: NAME}` or pass --scheme NAME");
  std::unique_ptr<Scheme> scheme = Registry<Scheme>::get().create(top.child("scheme"));
  // The file's partition is read as `run` reads it: a list, a scalar or an unknown key is the
  // same error here, not a section silently passed over.
  if (top.has("partition")) (void)read_options<PartitionOptions>(top.child("partition"));
  // The file's partition.placement (client_server, a device per stage) places the drawing too.
  if (top.has("partition") && top.child("partition").yaml().IsMap() && top.child("partition").has("placement")) {
    const ConfigNode where = top.child("partition").child("placement");
    scheme = placed_scheme(std::move(scheme), ConfigValue<Placement>::read(where), where);
  }
  const int in_file = file_partition(root, source, "stages");
  // Per-stage counts in the file draw PipeDream's replicated stages (unless --replicas).
  const std::vector<int> per_stage = vm.count("replicas") ? std::vector<int>{} : file_stage_replicas(root, source);
  if (per_stage.empty() && !vm.count("replicas") && file_partition(root, source, "replicas") > 0) {
    replicas = file_partition(root, source, "replicas");
  }
  if (replicas < 1 || replicas >= kMaxScheduleStages) {
    throw UsageError{fmt::format("--replicas {}: give a number from 1 to {}", replicas, kMaxScheduleStages - 1)};
  }
  const bool given = vm.count("stages") || in_file > 0;
  if (!vm.count("stages") && in_file > 0) stages = in_file;
  // The micro-batches come from --microbatches, or from the scheme's own count (scheme.chunks).
  const std::string micro_flag = vm.count("microbatches") || scheme->span() != Span::MiniBatch
                                     ? "--microbatches"
                                     : "the scheme's micro-batches (scheme.chunks)";
  if (!vm.count("microbatches") && scheme->span() == Span::MiniBatch) micro = scheme->micro_batches();
  if (stages < 1 || stages > kMaxScheduleStages) {
    throw UsageError{fmt::format("--stages {}: give a number from 1 to {}", stages, kMaxScheduleStages)};
  }
  if (micro < 1 || static_cast<int64_t>(stages) * micro > kMaxCells) {
    throw UsageError{fmt::format("{} {}: give a number from 1 to {} (at most {} stages x micro-batches)", micro_flag,
                                 micro, std::max<int64_t>(1, kMaxCells / stages), kMaxCells)};
  }
  if (vm.count("virtual-stages") && (virtual_stages < 1 || virtual_stages > stages)) {
    throw UsageError{fmt::format("--virtual-stages {}: give a number from 1 to --stages ({}), which it divides",
                                 virtual_stages, stages)};
  }
  // A scheme that fixes its stages (a custom file) answers 0 with its own count.
  int d = scheme->stages(given ? stages : 0);
  if (d == 0) d = scheme->stages(stages);
  // The plan `run` compiles from this file (and the flags in place of its keys): what is
  // drawn is what runs, ALLREDUCEs of replicas, a global clip and tied weights included.
  PlanRequest request;
  request.scheme = scheme.get();
  request.stages = d;
  request.replicas = per_stage.empty() ? Replicas{replicas, {}} : Replicas{1, per_stage};
  request.gradients = top.has("optimizer") ? read_gradient_options(top.child("optimizer")) : GradientOptions{};
  request.tied_weights = file_model_ties(top);
  request.segment_token_work = file_segment_token_work(top);
  request.several_processes = file_runs_processes(root);
  if (top.has("compression")) request.compression = read_compression(top.child("compression"));
  request.source = source;
  if (vm.count("replicas")) source->remember("partition.replicas", fmt::format("--replicas {}", replicas));
  const RunPlan plan = RunPlan::compile(request);
  if (static_cast<int64_t>(plan.layout().uniform() ? plan.stages() * plan.replicas() : plan.layout().stages()) *
          micro > kMaxCells) {
    throw UsageError{fmt::format("{} stages x {} micro-batches{} is more than {}", plan.stages(), micro,
                                 plan.copies() > 1 ? fmt::format(" x {} replicas", plan.copies()) : "", kMaxCells)};
  }
  const Schedule s =
      plan.training(plan.layout().uniform() ? equal_units(micro, plan.replicas()) : std::vector<int>{micro});
  validate_schedule(s, plan.rules());
  const auto [layout, note] = layout_words(plan);
  CostModel model = CostModel::split(s.stages(), costs[0], costs[1], costs[2]);
  const Timeline t = simulate_timeline(s, model);
  YAML::Emitter resolved;
  resolved << YAML::Flow << scheme->resolved();
  fmt::print("{} schedule, {} stage{}{} on {} device{}, {} {}{}\n\n", resolved.c_str(), d, d == 1 ? "" : "s", layout,
             s.devices(), s.devices() == 1 ? "" : "s", micro,
             scheme->span() == Span::MiniBatch ? "micro-batches of one mini-batch" : "mini-batches of one epoch", note);
  fmt::print("per-device actions, written <stage><action><micro-batch> (docs/schedules.md):\n"
             "  F forward                 B backward (input and weights)   I, W: B split into input, weights\n"
             "  H auxiliary head's backward (interlocking)                 U optimizer step\n{}\n",
             s.compute_only().to_text());
  if (s.segments() > 1) {
    fmt::print("units are sequence segments: unit u is segment u % {0} of micro-batch u / {0}; each micro-batch's "
               "segments run forward in order and backward in reverse (docs/schedules.md)\n\n",
               s.segments());
  }
  if (plan.sync().scope == CollectiveScope::Model) {
    fmt::print("{} over every stage: each U waits for an ALLREDUCE of all {} stages (shown with --lowered)\n\n",
               request.tied_weights ? "the model's tied weights meet" : "optimizer.clip_grad_norm clips", s.stages());
  }
  if (lowered) fmt::print("with its messages (lowered):\n{}\n", s.to_text());
  print_timeline(s, t, costs);
  if (!csv.empty()) {
    write_file_atomic(csv, s.to_csv());
    fmt::print("\nwrote {} (torch's compute-only CSV: no U, torch steps outside the schedule)\n", csv);
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(schedule, "print a scheme's per-device action table, bubble and peak in-flight micro-batches");
