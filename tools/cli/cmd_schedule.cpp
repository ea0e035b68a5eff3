/// pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D]
/// [--microbatches M]: the per-stage action lists, a clock-cycle grid and the bubble
/// fraction of a scheme, without running anything. The scheme comes from an experiment
/// file's scheme section (and its partition.stages), from --scheme, or both, with --set
/// overrides, so options such as interlocking's mode or GPipe's chunks can be drawn.
#include <fmt/format.h>

#include "core/config/config_node.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/scheme/scheme.h"
#include "tools/cli/options.h"

namespace pipelab::cli {

int schedule(const Args& args) {
  po::options_description options("options");
  std::string file, scheme_name;
  std::vector<std::string> sets;
  int stages = 4, micro = 8;
  double backward_cost = 1;
  options.add_options()("file", po::value(&file), "experiment file: its scheme section and partition.stages")(
      "scheme", po::value(&scheme_name), "registered scheme (pipelab list scheme); replaces the file's scheme type")(
      "set", po::value(&sets)->composing(), "override a value: --set scheme.mode=local (repeatable)")(
      "stages", po::value(&stages), "pipeline stages D (default: the file's partition.stages, else 4)")(
      "microbatches", po::value(&micro),
      "micro-batches of one run: GPipe-style schemes default to their chunks; 1F1B and interlocking schemes run "
      "one epoch's mini-batches (default 8)")(
      "backward-cost", po::value(&backward_cost)->default_value(1.0),
      "duration of B relative to F = 1; an auxiliary head's H costs half of it (whole numbers draw a grid)");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab schedule [FILE] [--scheme NAME] [--set scheme.key=value ...] [--stages D] [--microbatches M]\n\n"
             "  pipelab schedule --scheme gpipe --set scheme.chunks=4 --stages 4\n"
             "  pipelab schedule --scheme interlocking --set scheme.mode=pairwise --stages 4 --microbatches 468\n"
             "  pipelab schedule experiments/quickstart.yaml",
             options, positional, vm)) {
    return 0;
  }
  if (file.empty() && scheme_name.empty()) throw UsageError{"give an experiment FILE or --scheme NAME"};
  auto source = std::make_shared<ConfigSource>(file.empty() ? "--scheme" : file);
  YAML::Node root = file.empty() ? YAML::Node(YAML::NodeType::Map) : load_yaml_file(file);
  if (root.IsMap()) root.remove("sweep");  // a sweep file's base experiment
  if (!scheme_name.empty()) {
    if (!root["scheme"] || !root["scheme"].IsMap()) root["scheme"] = YAML::Node(YAML::NodeType::Map);
    root["scheme"]["type"] = scheme_name;
  }
  apply_overrides(root, sets, *source);
  const ConfigNode top(root, source, "");
  top.expect_map("an experiment");
  if (!top.has("scheme")) top.fail("no scheme section", "add `scheme: {type: NAME}` or pass --scheme NAME");
  const std::unique_ptr<Scheme> scheme = Registry<Scheme>::get().create(top.child("scheme"));
  if (!vm.count("stages") && root["partition"] && root["partition"]["stages"]) stages = root["partition"]["stages"].as<int>();
  if (!vm.count("microbatches") && scheme->span() == Span::MiniBatch) micro = scheme->micro_batches();
  if (stages < 1 || micro < 1 || backward_cost <= 0) {
    throw UsageError{"--stages, --microbatches and --backward-cost must be positive"};
  }
  const int d = scheme->stages(stages);
  const Schedule s = scheme->schedule(d, micro);
  validate_schedule(s, {scheme->max_in_flight(d)});
  // The cost model of a run summary's bubble_fraction_ideal (an auxiliary head costs half a B).
  const Timeline t = simulate_timeline(s, CostModel::uniform(d, 1, backward_cost, 0, 0.5 * backward_cost));
  YAML::Emitter resolved;
  resolved << YAML::Flow << scheme->resolved();
  fmt::print("{} schedule, {} stage{}, {} {}\n\n", resolved.c_str(), d, d == 1 ? "" : "s", micro,
             scheme->span() == Span::MiniBatch ? "micro-batches of one mini-batch" : "mini-batches of one epoch");
  fmt::print("per-stage actions, written <stage><action><micro-batch>:\n"
             "  F forward (sends its activation to the next stage)\n"
             "  B backward (sends the gradient of its input to the previous stage, where the scheme routes it)\n"
             "  H backward of the stage's own auxiliary head (interlocking), before its B\n"
             "  U optimizer step\n{}\n",
             s.to_text());
  bool heads = false;
  for (int r = 0; r < d; ++r) {
    for (const Action& a : s.stage(r)) heads = heads || a.kind == ActionKind::Head;
  }
  if (backward_cost == static_cast<int>(backward_cost) && !heads && t.makespan <= 200) {
    fmt::print("time ->  (one column per unit; F1 = forward of micro-batch 1, B1 likewise, '=' continues a\n"
               "backward, '*' = optimizer step after it, '.' = idle)\n{}\n",
               render_grid(t));
  }
  fmt::print("makespan {:g} units (F = 1, B = {:g}, H = {:g}, U = 0), bubble fraction {:.4f} ({:.1f}% of device time "
             "idle)\n",
             t.makespan, backward_cost, 0.5 * backward_cost, t.bubble_fraction, 100 * t.bubble_fraction);
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(schedule, "print a scheme's per-stage action table and bubble fraction");
