/// pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D]
/// [--microbatches M] [--virtual-stages v] [--costs F,B,W] [--lowered]: the per-device action
/// lists, a clock-cycle grid, the bubble and the peak in-flight micro-batches of a scheme,
/// without running anything. The scheme comes from an experiment file's scheme section (and
/// its partition.stages), from --scheme, or both, with --set overrides, so options such as
/// interlocking's mode or GPipe's chunks can be drawn.
#include <fmt/format.h>

#include <sstream>

#include "core/config/config_node.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/scheme/scheme.h"
#include "tools/cli/options.h"

namespace pipelab::cli {
namespace {

/// "1,1,1" -> {F, B, W}; B is the input-gradient half of a backward (the zero-bubble
/// papers' B, our I), W the weights' half, so a whole B costs B + W.
std::vector<double> parse_costs(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stod(item, &used));
      if (used != item.size()) out.back() = -1;
    } catch (const std::exception&) {
      out.push_back(-1);
    }
  }
  if (out.size() != 3 || out[0] <= 0 || out[1] <= 0 || out[2] < 0) {
    throw UsageError{fmt::format("--costs {}: give three numbers F,B,W (F, B > 0, W >= 0), e.g. --costs 1,1,1", text)};
  }
  return out;
}

}  // namespace

int schedule(const Args& args) {
  po::options_description options("options");
  std::string file, scheme_name, costs_text = "1,1,1";
  std::vector<std::string> sets;
  int stages = 4, micro = 8, virtual_stages = 0;
  bool lowered = false;
  options.add_options()("file", po::value(&file), "experiment file: its scheme section and partition.stages")(
      "scheme", po::value(&scheme_name), "registered scheme (pipelab list scheme); replaces the file's scheme type")(
      "set", po::value(&sets)->composing(), "override a value: --set scheme.mode=local (repeatable)")(
      "stages", po::value(&stages), "model stages (default: the file's partition.stages, else 4)")(
      "microbatches", po::value(&micro),
      "micro-batches of one run: micro-batched schemes default to their chunks; 1F1B and interlocking schemes run "
      "one epoch's mini-batches (default 8)")(
      "virtual-stages", po::value(&virtual_stages), "stages per device, for schemes with virtual_stages (sets it)")(
      "costs", po::value(&costs_text),
      "F,B,W durations (default 1,1,1): F forward, B the input-gradient part of a backward, W the weights' part; a "
      "whole backward costs B+W and an auxiliary head's H half of that (whole numbers draw a grid)")(
      "lowered", po::bool_switch(&lowered), "also print the schedule with its SEND/RECV actions");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D] [--microbatches M]\n"
             "                 [--virtual-stages v] [--costs F,B,W] [--lowered]\n\n"
             "  pipelab schedule --scheme gpipe --set scheme.chunks=4 --stages 4\n"
             "  pipelab schedule --scheme zb_h1 --stages 4 --microbatches 8\n"
             "  pipelab schedule --scheme interleaved_1f1b --stages 4 --virtual-stages 2 --microbatches 8\n"
             "  pipelab schedule --scheme custom --set scheme.file=experiments/schedules/1f1b_d2_m4.sched\n"
             "  pipelab schedule experiments/quickstart.yaml",
             options, positional, vm)) {
    return 0;
  }
  if (file.empty() && scheme_name.empty()) throw UsageError{"give an experiment FILE or --scheme NAME"};
  const std::vector<double> costs = parse_costs(costs_text);
  auto source = std::make_shared<ConfigSource>(file.empty() ? "--scheme" : file);
  YAML::Node root = file.empty() ? YAML::Node(YAML::NodeType::Map) : load_yaml_file(file);
  if (root.IsMap()) root.remove("sweep");  // a sweep file's base experiment
  if (!scheme_name.empty()) {
    if (!root["scheme"] || !root["scheme"].IsMap()) root["scheme"] = YAML::Node(YAML::NodeType::Map);
    root["scheme"]["type"] = scheme_name;
  }
  if (vm.count("virtual-stages")) {
    if (!root["scheme"] || !root["scheme"].IsMap()) root["scheme"] = YAML::Node(YAML::NodeType::Map);
    root["scheme"]["virtual_stages"] = virtual_stages;
  }
  apply_overrides(root, sets, *source);
  const ConfigNode top(root, source, "");
  top.expect_map("an experiment");
  if (!top.has("scheme")) top.fail("no scheme section", "add `scheme: {type: NAME}` or pass --scheme NAME");
  const std::unique_ptr<Scheme> scheme = Registry<Scheme>::get().create(top.child("scheme"));
  const bool given = vm.count("stages") || (root["partition"] && root["partition"]["stages"]);
  if (!vm.count("stages") && root["partition"] && root["partition"]["stages"]) stages = root["partition"]["stages"].as<int>();
  if (!vm.count("microbatches") && scheme->span() == Span::MiniBatch) micro = scheme->micro_batches();
  if (stages < 1 || micro < 1) throw UsageError{"--stages and --microbatches must be positive"};
  // A scheme that fixes its stages (a custom file) answers 0 with its own count.
  int d = scheme->stages(given ? stages : 0);
  if (d == 0) d = scheme->stages(stages);
  const Schedule s = with_communication(scheme->schedule(d, micro));
  validate_schedule(s, {scheme->max_in_flight(d)});
  CostModel model = CostModel::split(d, costs[0], costs[1], costs[2]);
  const Timeline t = simulate_timeline(s, model);
  YAML::Emitter resolved;
  resolved << YAML::Flow << scheme->resolved();
  fmt::print("{} schedule, {} stage{} on {} device{}, {} {}\n\n", resolved.c_str(), d, d == 1 ? "" : "s", s.devices(),
             s.devices() == 1 ? "" : "s", micro,
             scheme->span() == Span::MiniBatch ? "micro-batches of one mini-batch" : "mini-batches of one epoch");
  fmt::print("per-device actions, written <stage><action><micro-batch> (docs/schedules.md):\n"
             "  F forward                 B backward (input and weights)   I, W: B split into input, weights\n"
             "  H auxiliary head's backward (interlocking)                 U optimizer step\n{}\n",
             s.compute_only().to_text());
  if (lowered) fmt::print("with its messages (lowered):\n{}\n", s.to_text());
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
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(schedule, "print a scheme's per-device action table, bubble and peak in-flight micro-batches");
