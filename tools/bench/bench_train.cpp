/// Single-device training throughput of an experiment file's model on its dataset, measured
/// in one run: examples/s over N training steps (after W warm-up steps) and the share of that
/// time the training thread waited for its batches (the loader's `run.loader` settings).
/// The model, dataset, optimizer, batch size, seed, threads and loader come from the file,
/// so experiments/bench/*.yaml are the benchmarks:
///
///   build/pipelab_bench_train experiments/bench/resnet18_cifar10.yaml [--steps N] [--warmup W] [--set k=v ...]
///
/// Fewer steps than an epoch are the point on a 2-core machine (an epoch of ResNet-18 on
/// CIFAR-10 takes hours there); the program prints the epoch time the rate extrapolates to.
#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "core/experiment/experiment.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// The experiment's model on one device, trained with the experiment's optimizer.
struct Trainer {
  std::vector<pipelab::Block> blocks;
  std::shared_ptr<pipelab::Loss> loss;
  std::unique_ptr<pipelab::Optimizer> optimizer;
  Trainer(const pipelab::Experiment& e, const pipelab::DataSpec& spec) {
    const pipelab::ModelDef def = e.model->define(spec);
    std::vector<at::Tensor> params;
    for (size_t i = 0; i < def.blocks.size(); ++i) {
      blocks.push_back(pipelab::build_block(def, i, static_cast<uint64_t>(e.run.seed)));
      for (const auto& p : blocks.back().module.ptr()->parameters()) params.push_back(p);
    }
    loss = def.loss;
    optimizer = e.optimizer->make(params);
  }
  double step(const pipelab::Batch& b) {
    torch::Tensor x = b.x;
    for (auto& block : blocks) x = block.module.forward(x);
    const torch::Tensor l = loss->compute(x, b.y);
    l.backward();
    optimizer->step();
    optimizer->zero_grad();
    return l.item<double>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string file;
  std::vector<std::string> sets;
  int64_t steps = 20, warmup = 2;
  po::options_description options("usage: pipelab_bench_train FILE [options]");
  options.add_options()("help,h", "show this help")("file", po::value(&file), "experiment YAML (experiments/bench/)")(
      "set", po::value(&sets)->composing(), "override a value, as pipelab run --set")(
      "steps", po::value(&steps)->default_value(20), "measured training steps")(
      "warmup", po::value(&warmup)->default_value(2), "steps before measuring");
  po::positional_options_description positional;
  positional.add("file", 1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(), vm);
    po::notify(vm);
    if (vm.count("help") || file.empty()) {
      std::cout << options;
      return file.empty() && !vm.count("help") ? 2 : 0;
    }
    const pipelab::Experiment e = pipelab::Experiment::load(file, sets);
    if (e.run.threads > 0) at::set_num_threads(e.run.threads);
    auto start = Clock::now();
    const pipelab::DatasetSplits data = e.dataset->load(e.data_context());
    const double load_seconds = seconds_since(start);
    Trainer trainer(e, data.spec);
    pipelab::DataLoader loader(data.train, pipelab::LoaderOptions{e.run.batch_size, true, true,
                                                                  static_cast<uint64_t>(e.run.seed), e.run.loader});
    const int64_t per_epoch = loader.batches();
    if (warmup + steps > per_epoch) throw pipelab::UserError(fmt::format("--warmup + --steps exceed the {} batches of an epoch", per_epoch));
    loader.start_epoch(0);
    double first_loss = 0, last_loss = 0;
    for (int64_t j = 0; j < warmup; ++j) first_loss = trainer.step(loader.batch(j));
    loader.take_wait_seconds();
    start = Clock::now();
    for (int64_t j = warmup; j < warmup + steps; ++j) last_loss = trainer.step(loader.batch(j));
    const double seconds = seconds_since(start), wait = loader.take_wait_seconds();
    const double rate = static_cast<double>(steps * e.run.batch_size) / seconds;
    fmt::print("{}: model {}, {}\n", file, e.model->type(), data.description);
    fmt::print("  {} intra-op threads, loader workers {} prefetch {}, batch {}, dataset loaded in {:.1f}s\n",
               at::get_num_threads(), e.run.loader.workers, e.run.loader.prefetch, e.run.batch_size, load_seconds);
    fmt::print("  {} steps after {} warm-up: {:.1f} examples/s training, data wait {:.1f}%, {:.1f}s "
               "(loss {:.4f} -> {:.4f})\n",
               steps, warmup, rate, 100 * wait / seconds, seconds, first_loss, last_loss);
    fmt::print("  one epoch ({} steps) at this rate: {:.0f}s\n", per_epoch, static_cast<double>(per_epoch) * seconds / steps);
    return 0;
  } catch (const pipelab::UserError& err) {
    std::cerr << "error: " << err.what() << "\n";
    return 2;
  } catch (const std::exception& err) {
    std::cerr << "error: " << err.what() << "\n";
    return 1;
  }
}
