/// pipelab eval RUN_DIR [--checkpoint FILE] [--split test|train]: a finished run's weights on
/// its test split (or its training split, in evaluation mode), the figures an epoch's
/// evaluation prints, from the run's own config.yaml: the same data, model and cut.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "core/io/input_file.h"
#include "core/run/runner.h"
#include "tools/cli/options.h"

namespace fs = std::filesystem;

namespace pipelab::cli {
namespace {

/// The weights to evaluate: --checkpoint, else the run's final ones (summary.json names them).
std::string weights_of(const std::string& dir, const std::string& checkpoint) {
  if (!checkpoint.empty()) {
    if (!fs::is_regular_file(checkpoint)) {
      throw UsageError{fmt::format("--checkpoint {}: no such file. Fix: give a state dict of this run's model, e.g. "
                                   "{}/checkpoints/epoch_2.pt",
                                   checkpoint, dir)};
    }
    return checkpoint;
  }
  std::string named = "checkpoints/final.pt";
  if (fs::is_regular_file(fs::path(dir) / "summary.json")) {
    const nlohmann::json s = nlohmann::json::parse(read_file((fs::path(dir) / "summary.json").string()), nullptr, false);
    if (s.is_object() && s.contains("final_weights") && s["final_weights"].is_string()) named = s["final_weights"];
  }
  for (const std::string& name : {named, std::string("checkpoints/final.pt"), std::string("checkpoints/final.safetensors")}) {
    if (fs::is_regular_file(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  }
  throw UsageError{fmt::format("{}: the run has no final weights (it has not finished). Fix: finish it with `pipelab "
                               "run ... --resume`, or give --checkpoint {}/checkpoints/epoch_N.pt (run.checkpoint_every)",
                               dir, dir)};
}

}  // namespace

int eval(const Args& args) {
  po::options_description options("options");
  std::string dir, checkpoint, split = "test";
  std::vector<std::string> sets;
  options.add_options()("run", po::value(&dir)->required(), "a run's folder (its config.yaml and checkpoints/)")(
      "checkpoint", po::value(&checkpoint), "the weights to evaluate (default: the run's final ones)")(
      "split", po::value(&split), "test (default) or train (the training split, in evaluation mode)")(
      "set", po::value(&sets)->composing(),
      "override a value of the run's config: --set run.devices=[cuda:0] (repeatable)");
  po::positional_options_description positional;
  positional.add("run", 1);
  po::variables_map vm;
  if (!parse(args,
             "pipelab eval RUN_DIR [--checkpoint FILE] [--split test|train] [--set key.path=value ...]\n\n"
             "Evaluates a run's weights (its checkpoints/final.pt unless --checkpoint) on the run's own data and model,\n"
             "read from RUN_DIR/config.yaml, in one process: the test figures its last epoch printed, or the\n"
             "training split's in evaluation mode. Writes nothing.",
             options, positional, vm)) {
    return 0;
  }
  if (split != "test" && split != "train") throw UsageError{fmt::format("--split {}: use test or train", split)};
  const fs::path config = fs::path(dir) / "config.yaml";
  if (!fs::is_regular_file(config)) {
    throw UsageError{fmt::format("{}: no config.yaml, so not a run's folder. Fix: give the folder `pipelab run` wrote "
                                 "(run.output, e.g. runs/quickstart)",
                                 dir)};
  }
  const std::string weights = weights_of(dir, checkpoint);
  // One process, whatever executor trained it: the numbers do not depend on where stages run.
  sets.insert(sets.begin(), {"run.executor=sequential", "run.progress=false"});
  Experiment e = Experiment::load(config.string(), sets);
  RunnerOptions ro;
  ro.quiet = true;
  Runner runner(e, ro);
  const Evaluation r = runner.evaluate(weights, split == "train");
  const DatasetSplits& data = runner.data();
  fmt::print("{}: {} on its {} split ({} examples{})\n", dir, weights, split,
             (split == "train" ? data.train : data.test)->size(), split == "train" ? ", in evaluation mode" : "");
  fmt::print("{} loss {:.4f}  acc {:6.2f}%{}\n", split, r.loss, r.acc,
             std::isnan(r.mcc) ? "" : fmt::format("  mcc {:.2f}", r.mcc));
  return 0;
}

}  // namespace pipelab::cli

PIPELAB_COMMAND(eval, "a finished run's weights on its test (or training) split: pipelab eval RUN_DIR");
