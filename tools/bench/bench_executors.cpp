/// Benchmark (not a test): the same 2-stage GPipe step (m micro-batches) on the sequential,
/// threaded and distributed executors, in one process and one run, rounds interleaved so
/// machine noise hits all alike. Each stage is a stack of Linear+ReLU layers; every stage
/// thread uses one intra-op thread (2 stages on 2 cores). Prints median step times and
/// the ratios: threaded vs sequential (ideal for fill-drain GPipe: 2m/(m+1) = 1.78 at
/// m = 8) and distributed (2 ranks over Gloo on loopback, threads standing in for the
/// processes) vs threaded (the cost of serialising messages through c10d).
///
///   build/pipelab_bench_executors [--width W] [--layers L] [--batch N] [--chunks M] [--rounds R]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <future>
#include <iostream>

#include <fmt/format.h>

#include "core/processes/process_group.h"
#include "core/exec/executor.h"
#include "core/optim/optimizer.h"
#include "tools/bench/bench_cli.h"

namespace {

using namespace pipelab;
using Clock = std::chrono::steady_clock;

struct Options {
  int width = 1024, layers = 4, batch = 256, chunks = 8, rounds = 5, steps = 4;
};

/// Two stages of `layers` Linear(width, width)+ReLU blocks; the last ends in the loss.
struct Pipeline {
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<std::unique_ptr<GradientRoute>> routes;
  std::vector<StageSlot> slots;
  std::unique_ptr<Scheme> scheme;
  Pipeline(const Options& o) {
    auto source = std::make_shared<ConfigSource>("bench");
    scheme = Registry<Scheme>::get().create(
        ConfigNode(YAML::Load(fmt::format("{{type: gpipe, chunks: {}}}", o.chunks)), source, "scheme"));
    const auto sgd = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load("{type: sgd, lr: 0.01}"), source, "o"));
    for (int r = 0; r < 2; ++r) {
      StageSpec spec;
      spec.index = r;
      spec.count = 2;
      for (int l = 0; l < o.layers; ++l) {
        spec.blocks.push_back({fmt::format("linear{}_{}", r, l), torch::nn::AnyModule(torch::nn::Linear(o.width, o.width))});
        spec.blocks.push_back({fmt::format("relu{}_{}", r, l), torch::nn::AnyModule(torch::nn::ReLU())});
      }
      spec.first_block = static_cast<size_t>(r) * spec.blocks.size();
      if (r == 1) spec.loss = std::make_shared<CrossEntropyLoss>();
      stages.push_back(std::make_unique<Stage>(std::move(spec)));
      stages.back()->set_optimizer(sgd->make(stages.back()->parameters()));
      policies.push_back(scheme->make_policy(*stages.back()));
      routes.push_back(scheme->add_ons()->route(*stages.back()));
      StageSlot slot;
      slot.stage = stages.back().get();
      slot.policy = policies.back().get();
      slot.route = routes.back().get();
      slots.push_back(slot);
    }
  }
};

class Data : public Feed {
 public:
  Data(const Options& o) : x_(at::randn({o.batch / o.chunks, o.width})), y_(at::zeros({o.batch / o.chunks}, at::kLong)) {}
  at::Tensor input(int) override { return x_; }
  at::Tensor target(int) override { return y_; }
  void on_result(int, const MicroBatchResult&) override {}

 private:
  at::Tensor x_, y_;
};

std::unique_ptr<Executor> make(const std::string& yaml) {
  auto source = std::make_shared<ConfigSource>("bench");
  return Registry<Executor>::get().create(ConfigNode(YAML::Load(yaml), source, "executor"));
}


/// Seconds per step of `steps` steps on `executor`.
double time_steps(Executor& executor, Pipeline& p, Data& data, int steps) {
  const Schedule s = p.scheme->schedule(2, p.scheme->micro_batches());
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) executor.run(s, p.slots, data, RunMode::Train);
  return std::chrono::duration<double>(Clock::now() - start).count() / steps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  Options o;
  po::options_description desc("pipelab_bench_executors: sequential vs threaded vs distributed, 2-stage GPipe");
  desc.add_options()("help", "this help")("width", po::value(&o.width)->default_value(o.width), "layer width")(
      "layers", po::value(&o.layers)->default_value(o.layers), "Linear layers per stage")(
      "batch", po::value(&o.batch)->default_value(o.batch), "mini-batch size")(
      "chunks", po::value(&o.chunks)->default_value(o.chunks), "micro-batches m")(
      "steps", po::value(&o.steps)->default_value(o.steps), "steps per timing")(
      "rounds", po::value(&o.rounds)->default_value(o.rounds), "interleaved rounds (the median is reported)");
  po::variables_map vm;
  if (const auto code = pipelab::bench::parse_command_line(argc, argv, desc, vm)) return *code;
  at::set_num_threads(1);  // sequential: one core; threaded: one per stage thread
  Pipeline seq_p(o), thr_p(o);
  Data data(o);
  auto sequential = make("{type: sequential}");
  auto threaded = make("{type: threaded, intra_op_threads: 1}");
  const bool with_dist = dist::available();
  std::vector<std::unique_ptr<Pipeline>> ranks;
  std::vector<std::unique_ptr<Executor>> dist_exec;
  if (with_dist) {
    const int port = dist::free_port();
    for (int p = 0; p < 2; ++p) {
      ranks.push_back(std::make_unique<Pipeline>(o));
      dist_exec.push_back(make(fmt::format(
          "{{type: distributed, rank: {}, world_size: 2, master: '127.0.0.1:{}', intra_op_threads: 1}}", p, port)));
    }
  }
  // Both ranks step together (each a thread, as two processes would).
  const auto time_dist = [&](int steps) {
    auto r1 = std::async(std::launch::async, [&] {
      at::set_num_threads(1);
      Data d(o);
      return time_steps(*dist_exec[1], *ranks[1], d, steps);
    });
    Data d(o);
    const double t0 = time_steps(*dist_exec[0], *ranks[0], d, steps);
    return std::max(t0, r1.get());
  };
  // Warm-up (allocator, thread start, rendezvous).
  time_steps(*sequential, seq_p, data, 1);
  time_steps(*threaded, thr_p, data, 1);
  if (with_dist) time_dist(1);
  std::vector<double> seq, thr, dis;
  for (int r = 0; r < o.rounds; ++r) {
    seq.push_back(time_steps(*sequential, seq_p, data, o.steps));
    thr.push_back(time_steps(*threaded, thr_p, data, o.steps));
    if (with_dist) dis.push_back(time_dist(o.steps));
  }
  const double s = median(seq), t = median(thr);
  std::cout << fmt::format("2-stage GPipe, m = {}, batch {}, {} x Linear({}) per stage, 1 intra-op thread per stage\n",
                           o.chunks, o.batch, o.layers, o.width);
  std::cout << fmt::format("  sequential   {:8.2f} ms/step\n", s * 1e3);
  std::cout << fmt::format("  threaded     {:8.2f} ms/step   speed-up {:.2f}x (ideal {:.2f}x)\n", t * 1e3, s / t,
                           2.0 * o.chunks / (o.chunks + 1));
  if (with_dist) {
    const double d = median(dis);
    std::cout << fmt::format("  distributed  {:8.2f} ms/step   vs threaded {:+.1f}% ({:+.2f} ms/step over Gloo)\n", d * 1e3,
                             100 * (d / t - 1), (d - t) * 1e3);
  } else {
    std::cout << "  distributed  skipped: built without Gloo headers\n";
  }
  return 0;
}
