/// Benchmark (not a test): pipelab's `single` scheme against a plain hand-written LibTorch
/// training loop on the same model, batch size, data and step count, in the same process.
/// Rounds alternate between the two so machine noise hits both alike; the ratio of the
/// median times is printed. Goal: pipelab within 3% of the plain loop.
///
///   build/pipelab_bench_single [--model mlp|cnn] [--steps N] [--rounds R] [--threads T]
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "core/run/runner.h"
#include "core/util/allocator.h"
#include "tools/bench/bench_cli.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Setup {
  std::string yaml;
  std::function<torch::nn::Sequential()> plain_model;
  std::vector<int64_t> shape;
};

Setup setup(const std::string& model, int64_t samples) {
  const std::string common = fmt::format(
      "partition: {{stages: 1}}\nscheme: {{type: single}}\n"
      "optimizer: {{type: sgd, lr: 0.01, momentum: 0.9, weight_decay: 5.0e-4}}\n"
      "run: {{epochs: 1, batch_size: 128, seed: 0, progress: false}}\n");
  if (model == "mlp") {
    return {fmt::format("model: {{type: mlp, sizes: [784, 256, 256, 256, 10]}}\n"
                        "dataset: {{type: synthetic, samples: {}, test_samples: 128, shape: [784]}}\n{}",
                        samples, common),
            [] {
              return torch::nn::Sequential(torch::nn::Linear(784, 256), torch::nn::ReLU(), torch::nn::Linear(256, 256),
                                           torch::nn::ReLU(), torch::nn::Linear(256, 256), torch::nn::ReLU(),
                                           torch::nn::Linear(256, 10));
            },
            {784}};
  }
  return {fmt::format("model: {{type: cnn, channels: [32, 64], hidden: 128, batch_norm: false}}\n"
                      "dataset: {{type: synthetic, samples: {}, test_samples: 128, shape: [1, 28, 28]}}\n{}",
                      samples, common),
          [] {
            return torch::nn::Sequential(
                torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(),
                torch::nn::MaxPool2d(2), torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)),
                torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(), torch::nn::Linear(64 * 7 * 7, 128),
                torch::nn::ReLU(), torch::nn::Linear(128, 10));
          },
          {1, 28, 28}};
}

/// A plain loop as a PyTorch user writes it: shuffle, slice a batch, forward, loss,
/// backward, step, and keep the running loss and accuracy.
double plain_loop(const Setup& s, const at::Tensor& x, const at::Tensor& y, int64_t steps) {
  torch::manual_seed(0);
  torch::nn::Sequential model = s.plain_model();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
  const auto start = Clock::now();
  const at::Tensor order = at::randperm(x.size(0));
  double running_loss = 0;
  int64_t correct = 0;
  for (int64_t j = 0; j < steps; ++j) {
    const at::Tensor idx = order.narrow(0, j * 128, 128);
    const at::Tensor xb = x.index_select(0, idx), yb = y.index_select(0, idx);
    opt.zero_grad();
    const at::Tensor out = model->forward(xb);
    const at::Tensor loss = torch::nn::functional::cross_entropy(out, yb);
    loss.backward();
    opt.step();
    running_loss += loss.item<double>();
    correct += out.argmax(1).eq(yb).sum().item<int64_t>();
  }
  if (running_loss < 0 || correct < 0) std::cerr << "impossible\n";
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// pipelab's runner on the same data: the training time of its one epoch.
double pipelab_loop(const Setup& s, const std::string& out) {
  pipelab::Experiment e = pipelab::Experiment::parse(s.yaml, "bench.yaml", {"run.output=" + out});
  pipelab::Runner runner(e, {true, true});
  return runner.run().history.at(0).train_seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string model = "mlp";
  int64_t steps = 200;
  int rounds = 7;
  int threads = 0;
  std::string only;
  po::options_description options(
      "usage: pipelab_bench_single [--model mlp|cnn] [--steps N] [--rounds R] [--threads T]\n\noptions");
  options.add_options()("help,h", "show this help")("model", po::value(&model)->default_value("mlp"), "mlp or cnn")(
      "steps", po::value(&steps)->default_value(200), "training steps per round (batch 128)")(
      "rounds", po::value(&rounds)->default_value(7), "alternating rounds of each loop")(
      "threads", po::value(&threads)->default_value(0), "intra-op threads (0: LibTorch's default)")(
      "only", po::value(&only), "run only `plain` or `pipelab` (for profiling one side)")(
      "glibc-defaults", "leave glibc's mmap/trim thresholds at their defaults");
  po::variables_map vm;
  if (const auto code = pipelab::bench::parse_command_line(argc, argv, options, vm)) return *code;
  if (threads > 0) at::set_num_threads(threads);
  // Both loops run under the allocator setting the pipelab command uses
  // (core/util/allocator.h); --glibc-defaults measures them without it.
  if (!vm.count("glibc-defaults")) pipelab::keep_freed_memory();
  const Setup s = setup(model, steps * 128);
  // The same synthetic examples the runner loads.
  pipelab::Experiment e = pipelab::Experiment::parse(s.yaml, "bench.yaml");
  const pipelab::DatasetSplits data = e.dataset->load({});
  std::vector<int64_t> all(static_cast<size_t>(data.train->size()));
  std::iota(all.begin(), all.end(), 0);
  const pipelab::Batch train = data.train->get(all, 0);
  const std::string out = (std::filesystem::temp_directory_path() / "pipelab-bench-single").string();
  std::vector<double> plain, lab;
  plain_loop(s, train.x, train.y, steps / 4);  // warm-up of both paths
  pipelab_loop(s, out);
  for (int r = 0; r < rounds; ++r) {
    plain.push_back(only == "pipelab" ? 1.0 : plain_loop(s, train.x, train.y, steps));
    lab.push_back(only == "plain" ? 1.0 : pipelab_loop(s, out));
  }
  std::filesystem::remove_all(out);
  const double p = median(plain), l = median(lab);
  fmt::print("model {}, batch 128, {} steps, {} rounds, {} intra-op threads, {}\n", model, steps, rounds,
             at::get_num_threads(), vm.count("glibc-defaults") ? "glibc allocator defaults" : "freed memory kept");
  fmt::print("  plain LibTorch loop   median {:.3f}s  ({:.2f} ms/step)\n", p, 1e3 * p / static_cast<double>(steps));
  fmt::print("  pipelab single        median {:.3f}s  ({:.2f} ms/step)\n", l, 1e3 * l / static_cast<double>(steps));
  fmt::print("  ratio pipelab / plain {:.4f}  ({:+.2f}%)\n", l / p, 100 * (l / p - 1));
  return 0;
}
