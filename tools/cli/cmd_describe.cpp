/// pipelab describe FILE [--set key.path=value ...] [--input-shape S --classes N [--token-ids] [--target-shape T]]:
/// the experiment's model block by block (output shape, parameters, forward FLOPs for one
/// example) and its stages under the file's `partition`, without training anything.
#include <fmt/format.h>

#include "core/experiment/experiment.h"
#include "core/experiment/plan_request.h"
#include "core/model/block_costs.h"
#include "core/model/meta_device.h"
#include "core/plan/run_plan.h"
#include "core/plan/topology.h"
#include "tools/cli/load_experiment.h"
#include "tools/cli/model_input.h"
#include "tools/cli/options.h"
#include "tools/describe/model_profile.h"

namespace pipelab::cli {
namespace {

/// Blocks per stage as the runner resolves them, and a line saying how.
std::pair<std::vector<int>, std::string> stages_of(const Experiment& e, const ModelDef& def,
                                                   const std::vector<BlockProfile>& blocks) {
  const int requested = e.partition.stages;
  const int stages = e.scheme->stages(requested);
  const Balance& balance = e.partition.balance;
  std::string how = balance.kind == Balance::Kind::Named    ? balance.name
                    : balance.kind == Balance::Kind::Counts ? "given"
                    : balance.kind == Balance::Kind::Auto   ? "auto (by forward FLOPs)"
                                                            : balance_name(balance.kind);
  if (balance.kind == Balance::Kind::Time) how = "time (profiled when a run starts; shown here by forward FLOPs)";
  // The profile's per-example figures: parameters, FLOPs, and the memory estimate of
  // core/model/block_costs.h (3 x float32 parameters + the float32 output).
  const auto costs = [&](Balance::Kind kind) {
    std::vector<double> out;
    for (const BlockProfile& b : blocks) {
      int64_t sent = 0;
      for (const TensorProfile& t : b.live) sent += t.bytes;
      out.push_back(kind == Balance::Kind::Params   ? std::max<double>(1, static_cast<double>(b.parameters))
                    : kind == Balance::Kind::Memory ? 12.0 * static_cast<double>(b.parameters) + static_cast<double>(sent)
                                                    : static_cast<double>(b.flops));
    }
    return kind == Balance::Kind::Params ? out : with_floor(std::move(out));
  };
  std::vector<int> counts;
  if (stages == requested) {
    counts = resolve_balance(balance, stages, static_cast<int>(blocks.size()), costs, def.named_balances, *e.source);
  } else {
    counts = {static_cast<int>(blocks.size())};
    how = fmt::format("scheme {} runs the whole model on one stage", e.scheme->type());
  }
  const std::vector<int64_t> shown(counts.begin(), counts.end());
  // The copies the run's plan makes (and what it would refuse about them).
  const Topology topology = topology_of(RunPlan::compile(plan_request(e)));
  const std::string copies =
      !topology.stage_copies.empty()
          ? "; each stage's copies on their own devices, the mini-batches dealt round robin to them, averaging "
            "their gradients (PipeDream's 1F1B-RR)"
      : topology.pipelines > 1 ? fmt::format("; each pipeline trains on 1/{} of every mini-batch, all-reducing each "
                                             "stage's gradients",
                                             topology.pipelines)
                               : "";
  return {counts, fmt::format("{} stage{}, balance {} = {}\non {}{}", counts.size(), counts.size() == 1 ? "" : "s",
                              how, shape_text(shown), topology.text(), copies)};
}

}  // namespace

int describe(const Args& args) {
  po::options_description options("options");
  std::string file;
  std::vector<std::string> sets;
  std::string preset = kNoPreset;
  options.add_options()("file", po::value(&file)->required(), "experiment YAML file")(
      "set", po::value(&sets)->composing(), "override a value: --set model.depth=34 (repeatable)")(
      "preset", po::value(&preset), kPresetHelp);
  add_input_options(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab describe FILE [--set key.path=value ...] [--input-shape S --classes N [--token-ids] [--target-shape T]]\n\n"
             "Prints the model of FILE block by block: output shape, parameters and forward FLOPs for one\n"
             "example (2 x the multiply-adds of matmul, convolution and RNN calls, counted from the shapes\n"
             "ATen records; elementwise work not counted), then each stage of the file's partition with its\n"
             "share of parameters and FLOPs and the max/mean imbalance. The dataset is loaded only for\n"
             "its example shape; --input-shape skips loading it.",
             options, positional, vm)) {
    return 0;
  }
  const Experiment e = load_experiment_or_first_cell(file, with_preset(sets, preset));
  const DataSpec spec = data_spec(e, vm);
  const ModelDef def = with_example_flags(vm, [&] { return e.model->define(spec); });
  dataflow(def, e.model->type());  // a malformed block list: a clear error before any block runs
  const std::vector<BlockProfile> blocks = with_example_flags(vm, [&] { return profile_blocks_from_shapes(def, spec, static_cast<uint64_t>(e.run.seed)); });
  const auto [balance, partition] = stages_of(e, def, blocks);
  fmt::print("{}: model {} on examples {}{}, {} classes{}\n\n", file, e.model->type(), shape_text(spec.input_shape),
             spec.integer_input ? " (int64 word ids)" : "", spec.classes,
             spec.target_shape.empty() ? "" : " at each of " + shape_text(spec.target_shape) + " positions");
  fmt::print("{}", render_profile(blocks, stage_totals(blocks, balance), partition));
  for (const TiedParameter& tie : def.ties) {
    // Each copy is counted where it lives: a tie across stages is one weight held twice.
    fmt::print("\ntied: {} is {} (a copy that starts equal; their gradients are summed before each update)\n",
               tie.second, tie.first);
  }
  fmt::print("\nFLOPs: forward, one example, 2 x multiply-adds of aten mm/addmm/bmm/convolution/lstm calls\n");
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(describe, "print a model's blocks (shape, parameters, FLOPs) and its stages: pipelab describe FILE");
