/// Benchmark (not a test): how `partition.balance: params | flops | time | memory` cut real
/// models, and what each split costs the threaded executor. For each model and stage count
/// it prints, per method, the blocks per stage, the max/mean imbalance of the stages'
/// forward FLOPs and of their measured forward+backward time (block_seconds, one
/// micro-batch), the measured time of a GPipe step on the threaded executor (a thread per
/// stage, 1 intra-op thread each; the mean over an epoch of `--steps` + 1 steps), and the
/// step that one device per stage would take: the schedule replayed with the action times
/// of a run on the sequential executor, where no stage waits for a core (on a machine with
/// fewer cores than stages the threaded step measures mostly the total work).
///
///   build/pipelab_bench_balance [--models resnet18,resnet50,transformer] [--stages 2,4,8]
///                               [--batch 32] [--chunks 4] [--steps 3]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/io/pt_file.h"
#include "core/model/block_costs.h"
#include "core/run/runner.h"
#include "core/util/error.h"
#include "tools/bench/bench_cli.h"

namespace {

using namespace pipelab;
namespace fs = std::filesystem;

struct ModelCase {
  std::string name, model, dataset;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

/// max / mean of the per-stage sums of `costs` under `counts`.
double imbalance(const std::vector<double>& costs, const std::vector<int>& counts) {
  std::vector<double> stages;
  size_t next = 0;
  for (const int c : counts) {
    double sum = 0;
    for (int k = 0; k < c; ++k) sum += costs[next++];
    stages.push_back(sum);
  }
  const double mean = std::accumulate(stages.begin(), stages.end(), 0.0) / static_cast<double>(stages.size());
  return *std::max_element(stages.begin(), stages.end()) / mean;
}

std::string experiment(const ModelCase& m, int stages, const std::string& balance, int batch, int chunks, int steps,
                       const std::string& executor) {
  return fmt::format(
      "model: {}\ndataset: {}\npartition: {{stages: {}, balance: {}}}\n"
      "scheme: {{type: gpipe, chunks: {}}}\noptimizer: {{type: sgd, lr: 0.01, momentum: 0.9}}\n"
      "run: {{epochs: 1, batch_size: {}, seed: 0, threads: 1, progress: false, "
      "executor: {}}}\n",
      m.model, fmt::format(fmt::runtime(m.dataset), batch * (steps + 1)), stages, balance, chunks, batch, executor);
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string models = "resnet18,resnet50,transformer", stage_list = "2,4,8";
  int batch = 32, chunks = 4, steps = 3;
  po::options_description desc("pipelab_bench_balance: balance methods on real models");
  desc.add_options()("help,h", "this help")("models", po::value(&models)->default_value(models), "models")(
      "stages", po::value(&stage_list)->default_value(stage_list), "stage counts")(
      "batch", po::value(&batch)->default_value(batch), "mini-batch")(
      "chunks", po::value(&chunks)->default_value(chunks), "GPipe micro-batches")(
      "steps", po::value(&steps)->default_value(steps), "timed steps per configuration");
  po::variables_map vm;
  if (const auto code = pipelab::bench::parse_command_line(argc, argv, desc, vm)) return *code;
  at::set_num_threads(1);
  const fs::path tmp = fs::temp_directory_path() / "pipelab-bench-balance";
  fs::create_directories(tmp);
  // IMDB-shaped token ids for the Transformer (a `tensors` file: random ids, random labels).
  const std::string ids = (tmp / "ids.pt").string();
  // As many training examples as the synthetic models get, and 32 held out for testing.
  const int64_t n = static_cast<int64_t>(batch) * (steps + 1) + 32;
  const double test_fraction = 32.5 / static_cast<double>(n);
  save_tensor_dict(ids, {{"x", at::randint(10000, {n, 200}, at::kLong)}, {"y", at::randint(2, {n}, at::kLong)}});
  const std::vector<ModelCase> all{
      {"resnet18", "{type: resnet, depth: 18}",
       "{{type: synthetic, samples: {}, test_samples: 32, shape: [3, 32, 32], classes: 10}}"},
      {"resnet50", "{type: resnet, depth: 50}",
       "{{type: synthetic, samples: {}, test_samples: 32, shape: [3, 32, 32], classes: 10}}"},
      {"transformer", "{type: transformer}", fmt::format("{{{{type: tensors, path: {}, test_fraction: {}}}}}", ids, test_fraction)}};
  fmt::print("GPipe (chunks {}), batch {}, threaded executor with 1 intra-op thread per stage, an epoch of {} steps\n\n",
             chunks, batch, steps + 1);
  fmt::print("| model | stages | balance | blocks per stage | FLOP imbalance | time imbalance | threaded step (ms) | "
             "one device per stage (ms) |\n|---|---:|---|---|---:|---:|---:|---:|\n");
  for (const std::string& name : split(models)) {
    const auto m = std::find_if(all.begin(), all.end(), [&](const ModelCase& c) { return c.name == name; });
    if (m == all.end()) {
      std::cerr << "unknown model " << name << "\n";
      return 2;
    }
    for (const std::string& st : split(stage_list)) {
      const int stages = std::stoi(st);
      std::vector<double> flops, seconds;
      for (const char* method : {"params", "flops", "time", "memory"}) {
        const std::string out = (tmp / fmt::format("{}-{}-{}", name, stages, method)).string();
        Experiment e = Experiment::parse(
            experiment(*m, stages, method, batch, chunks, steps, "{type: threaded, intra_op_threads: 1}"), "bench.yaml",
            {"run.output=" + out});
        RunnerOptions ro;
        ro.overwrite = true;
        ro.quiet = true;
        std::unique_ptr<Runner> made;
        try {
          made = std::make_unique<Runner>(e, ro);
        } catch (const ConfigError& err) {
          // More stages than blocks (the Transformer has 5): a row that says so, not an abort.
          fmt::print("| {} | {} | – | not possible: {} | | | | |\n", name, stages, err.what());
          break;
        }
        Runner& runner = *made;
        const YAML::Node counts_node = runner.resolved_config()["partition"]["balance"];
        std::vector<int> counts;
        for (const auto& c : counts_node) counts.push_back(c.as<int>());
        if (flops.empty()) {
          // Per-block costs once per model and stage count (the same micro-batch as the runner).
          std::vector<Block> blocks;
          const ModelDef def = e.model->define(runner.data_spec());
          for (size_t i = 0; i < def.blocks.size(); ++i) blocks.push_back(build_block(def, i, 0));
          const at::Tensor x = runner.sample_inputs(std::max(1, batch / chunks));
          flops = block_flops(blocks, x);
          seconds = block_seconds(blocks, x, c10::kCPU, 3);
        }
        const RunSummary s = runner.run();
        // Per step from the epoch's throughput (the Transformer's epoch has more than
        // `steps` + 1 steps: its examples come from a file).
        const double ms = 1e3 * batch / s.history.at(0).samples_per_second;
        // The same split (the counts, so that `time` does not measure again) on the
        // sequential executor, for uncontended action times.
        Experiment seq = Experiment::parse(
            experiment(*m, stages, fmt::format("[{}]", fmt::join(counts, ", ")), batch, chunks, steps, "{type: sequential}"),
            "bench.yaml", {"run.output=" + out + "-sequential"});
        const RunSummary q = Runner(seq, ro).run();
        const double projected = 1e3 * batch / q.simulated_samples_per_second;
        fmt::print("| {} | {} | {} | {} | {:.2f} | {:.2f} | {:.1f} | {:.1f} |\n", name, stages, method,
                   fmt::join(counts, ", "), imbalance(flops, counts), imbalance(seconds, counts), ms, projected);
        std::cout << std::flush;
        fs::remove_all(out);
        fs::remove_all(out + "-sequential");
      }
    }
  }
  fs::remove_all(tmp);
  return 0;
}
