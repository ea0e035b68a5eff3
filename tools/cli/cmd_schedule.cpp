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
#include "core/experiment/optimizer_section.h"
#include "core/experiment/plan_request.h"
#include "core/io/atomic_file.h"
#include "core/model/model.h"
#include "core/model/partition.h"
#include "core/plan/run_plan.h"
#include "core/plan/topology.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/scheme/placed_scheme.h"
#include "core/scheme/replicas.h"
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

/// The heading's words for the plan's layout: " x 2 replicas" and how stages are numbered.
std::string layout_note(const RunPlan& plan) {
  if (!plan.layout().uniform()) {
    return " dealt round robin to each stage's copies (PipeDream's 1F1B-RR; stages numbered copy by copy; "
           "ALLREDUCE averages a stage's copies)";
  }
  if (plan.replicas() == 1) return "";
  return " per pipeline (pipeline r's stage p is stage r*D+p; ALLREDUCE sums a stage's copies)";
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

/// The command's flags, as given.
struct ScheduleFlags {
  std::string file, scheme_name, costs_text = "1,1,1", csv;
  std::vector<std::string> sets;
  std::string preset = kNoPreset;
  int stages = 4, micro = 8, virtual_stages = 0, replicas = 1;
  bool lowered = false;
};

/// Parses the flags; false when --help was asked (and printed).
bool parse_flags(const Args& args, ScheduleFlags& f, po::variables_map& vm) {
  po::options_description options("options");
  options.add_options()("file", po::value(&f.file), "experiment file: its scheme section and partition.stages")(
      "scheme", po::value(&f.scheme_name), "registered scheme (pipelab list scheme); replaces the file's scheme type")(
      "set", po::value(&f.sets)->composing(), "override a value: --set scheme.mode=local (repeatable)")(
      "preset", po::value(&f.preset), kPresetHelp)(
      "stages", po::value(&f.stages), "model stages (default: the file's partition.stages, else 4)")(
      "microbatches", po::value(&f.micro),
      "micro-batches of one run: micro-batched schemes default to their chunks; 1F1B and interlocking schemes run "
      "one epoch's mini-batches (default 8)")(
      "virtual-stages", po::value(&f.virtual_stages), "stages per device, for schemes with virtual_stages (sets it)")(
      "replicas", po::value(&f.replicas),
      "copies of the pipeline, each on its own devices and micro-batches, all-reducing each stage's gradients "
      "before its update (default: the file's partition.replicas, else 1)")(
      "costs", po::value(&f.costs_text),
      "F,B,W durations (default 1,1,1): F forward, B the input-gradient part of a backward, W the weights' part; a "
      "whole backward costs B+W and an auxiliary head's H half of that (whole numbers draw a grid)")(
      "lowered", po::bool_switch(&f.lowered), "also print the schedule with its SEND/RECV actions")(
      "csv", po::value(&f.csv),
      "also write the schedule as torch.distributed.pipelining's compute-only CSV (what its _load_csv reads)");
  po::positional_options_description positional;
  positional.add("file", 1);
  return parse(args,
               "pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D] [--microbatches M]\n"
               "                 [--virtual-stages v] [--replicas R] [--costs F,B,W] [--lowered] [--csv OUT]\n\n"
               "  pipelab schedule --scheme gpipe --set scheme.chunks=4 --stages 4\n"
               "  pipelab schedule --scheme zb_h1 --stages 4 --microbatches 8\n"
               "  pipelab schedule --scheme interleaved_1f1b --stages 4 --virtual-stages 2 --microbatches 8\n"
               "  pipelab schedule --scheme gpipe --stages 2 --replicas 2 --microbatches 4\n"
               "  pipelab schedule --scheme custom --set scheme.file=experiments/schedules/1f1b_d2_m4.sched\n"
               "  pipelab schedule experiments/quickstart.yaml",
               options, positional, vm);
}

/// The drawn file's scheme: its scheme section, on its partition.placement (client_server, a
/// device per stage) when it has one.
std::unique_ptr<Scheme> drawn_scheme(const ConfigNode& top) {
  if (!top.has("scheme")) top.fail("no scheme section", "add `scheme: {type: NAME}` or pass --scheme NAME");
  std::unique_ptr<Scheme> scheme = Registry<Scheme>::get().create(top.child("scheme"));
  // The file's partition is read as `run` reads it: a list, a scalar or an unknown key is the
  // same error here, not a section silently passed over.
  if (top.has("partition")) (void)read_options<PartitionOptions>(top.child("partition"));
  if (top.has("partition") && top.child("partition").yaml().IsMap() && top.child("partition").has("placement")) {
    const ConfigNode where = top.child("partition").child("placement");
    scheme = placed_scheme(std::move(scheme), ConfigValue<Placement>::read(where), where);
  }
  return scheme;
}

/// Settles the stage count from the flags, the file and the scheme, and returns the scheme's
/// (a scheme that fixes its own, a custom file, keeps it).
int settle_stages(ScheduleFlags& f, const po::variables_map& vm, const YAML::Node& root,
                  const std::shared_ptr<ConfigSource>& source, const Scheme& scheme) {
  const int in_file = file_partition(root, source, "stages");
  if (f.replicas < 1 || f.replicas >= kMaxScheduleStages) {
    throw UsageError{fmt::format("--replicas {}: give a number from 1 to {}", f.replicas, kMaxScheduleStages - 1)};
  }
  const bool given = vm.count("stages") || in_file > 0;
  if (!vm.count("stages") && in_file > 0) f.stages = in_file;
  if (f.stages < 1 || f.stages > kMaxScheduleStages) {
    throw UsageError{fmt::format("--stages {}: give a number from 1 to {}", f.stages, kMaxScheduleStages)};
  }
  if (vm.count("virtual-stages") && (f.virtual_stages < 1 || f.virtual_stages > f.stages)) {
    throw UsageError{fmt::format("--virtual-stages {}: give a number from 1 to --stages ({}), which it divides",
                                 f.virtual_stages, f.stages)};
  }
  const int d = scheme.stages(given ? f.stages : 0);
  return d == 0 ? scheme.stages(f.stages) : d;
}

/// The micro-batches drawn: --microbatches, else a flushed step's own (scheme.chunks); a
/// pipeline that runs on draws --microbatches mini-batches of one epoch (8 by default).
void settle_micro_batches(ScheduleFlags& f, const po::variables_map& vm, const RunPlan& plan) {
  const bool own = !vm.count("microbatches") && plan.flushed();
  if (own) f.micro = plan.step(/*batch_size=*/1).micro_batches;
  if (f.micro < 1 || static_cast<int64_t>(f.stages) * f.micro > kMaxCells) {
    throw UsageError{fmt::format("{} {}: give a number from 1 to {} (at most {} stages x micro-batches)",
                                 own ? "the scheme's micro-batches (scheme.chunks)" : "--microbatches", f.micro,
                                 std::max<int64_t>(1, kMaxCells / f.stages), kMaxCells)};
  }
}

/// The heading, the action lists and what the schedule's ALLREDUCEs and segments mean.
void print_lists(const ScheduleFlags& f, const Scheme& scheme, const RunPlan& plan, const Schedule& s,
                 bool tied_weights) {
  YAML::Emitter resolved;
  resolved << YAML::Flow << scheme.resolved();
  fmt::print("{} schedule on {}, {} {}{}\n\n", resolved.c_str(), topology_of(plan).text(), f.micro,
             plan.flushed() ? "micro-batches of one mini-batch" : "mini-batches of one epoch", layout_note(plan));
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
               tied_weights ? "the model's tied weights meet" : "optimizer.clip_grad_norm clips", s.stages());
  }
  if (f.lowered) fmt::print("with its messages (lowered):\n{}\n", s.to_text());
}

}  // namespace

int schedule(const Args& args) {
  ScheduleFlags f;
  po::variables_map vm;
  if (!parse_flags(args, f, vm)) return 0;
  if (f.file.empty() && f.scheme_name.empty()) throw UsageError{"give an experiment FILE or --scheme NAME"};
  check_output_file("--csv", f.csv);
  const std::vector<double> costs = parse_costs(f.costs_text);
  auto source = std::make_shared<ConfigSource>(f.file.empty() ? "--scheme" : f.file);
  const YAML::Node root = drawn_experiment(f.file, f.scheme_name, vm.count("virtual-stages") ? f.virtual_stages : 0,
                                           with_preset(f.sets, f.preset), *source);
  const ConfigNode top(root, source, "");
  top.expect_map("an experiment");
  const std::unique_ptr<Scheme> scheme = drawn_scheme(top);
  const int d = settle_stages(f, vm, root, source, *scheme);
  // The plan `run` compiles from this file (and the flags in place of its keys): what is
  // drawn is what runs, ALLREDUCEs of replicas, a global clip and tied weights included.
  PlanRequest request = plan_request(top, *scheme, d);
  if (vm.count("replicas")) {
    request.replicas = Replicas{f.replicas, {}};
    source->remember("partition.replicas", fmt::format("--replicas {}", f.replicas));
  }
  const RunPlan plan = RunPlan::compile(request);
  settle_micro_batches(f, vm, plan);
  if (static_cast<int64_t>(plan.layout().uniform() ? plan.stages() * plan.replicas() : plan.layout().stages()) *
          f.micro > kMaxCells) {
    throw UsageError{fmt::format("{} stages x {} micro-batches{} is more than {}", plan.stages(), f.micro,
                                 plan.copies() > 1 ? fmt::format(" x {} replicas", plan.copies()) : "", kMaxCells)};
  }
  const Schedule s =
      plan.training(plan.layout().uniform() ? equal_units(f.micro, plan.replicas()) : std::vector<int>{f.micro});
  validate_schedule(s, plan.rules());
  print_lists(f, *scheme, plan, s, request.tied_weights);
  print_timeline(s, simulate_timeline(s, CostModel::split(s.stages(), costs[0], costs[1], costs[2])), costs);
  if (!f.csv.empty()) {
    write_file_atomic(f.csv, s.to_csv());
    fmt::print("\nwrote {} (torch's compute-only CSV: no U, torch steps outside the schedule)\n", f.csv);
  }
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(schedule, "print a scheme's per-device action table, bubble and peak in-flight micro-batches");
