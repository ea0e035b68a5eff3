/// Benchmark (not a test): one model, several schedules, on 2 devices. The model is a stack of
/// Linear+ReLU layers cut into the schedule's stages (2 stages for one stage per device, 4 for
/// two chunks per device); every schedule runs the same mini-batch of m micro-batches on the
/// sequential executor (the baseline: one thread, one core) and on the threaded one (one
/// thread and one core per device), rounds interleaved. For each it prints the measured step
/// times, the measured speed-up, and two predictions from the timeline simulation: the speed-up
/// with unit costs (F = I = W = 1 per stage), and the threaded step time with the per-action
/// times the sequential run measured (each action alone on a core) replayed on the devices.
///
///   build/pipelab_bench_schedules [--width W] [--layers L] [--batch N] [--chunks M] [--rounds R]
///                                 [--schemes gpipe,pipedream_flush,zb_h1,interleaved_1f1b,...]
///
/// A scheme is NAME[:key=value...] (`zb_h1:virtual_stages=2`, torch's interleaved zero bubble).
/// Chimera's two pipelines are two replicas on the same devices: its stages all-reduce their
/// two copies' gradients before each step, and its mini-batch is split between them.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "core/exec/executor.h"
#include "core/optim/optimizer.h"
#include "core/schedule/lower.h"
#include "core/schedule/timeline.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "tools/bench/bench_cli.h"

namespace {

using namespace pipelab;
using Clock = std::chrono::steady_clock;

struct Options {
  int width = 512, layers = 8, batch = 256, chunks = 8, rounds = 5, steps = 3, devices = 2;
  std::string schemes = "gpipe,pipedream_flush,zb_h1,interleaved_1f1b";
};

/// `name[:key=value...]` with `chunks` = m.
std::unique_ptr<Scheme> make_scheme(const std::string& spec, const Options& o) {
  auto source = std::make_shared<ConfigSource>("bench");
  std::stringstream parts(spec);
  std::string name, option;
  std::getline(parts, name, ':');
  YAML::Node node(YAML::NodeType::Map);
  node["type"] = name;
  node["chunks"] = o.chunks;
  while (std::getline(parts, option, ':')) {
    const size_t eq = option.find('=');
    if (eq == std::string::npos) throw UserError(fmt::format("--schemes {}: write key=value after the name", spec));
    node[option.substr(0, eq)] = YAML::Load(option.substr(eq + 1));
  }
  return Registry<Scheme>::get().create(ConfigNode(node, source, "scheme"));
}

/// The fewest pipeline stages the scheme (with its replicas) places on `devices` devices.
int stages_on(const Scheme& scheme, int devices) {
  for (int stages = 1; stages <= 8 * devices; ++stages) {
    try {
      const std::vector<int> placement = replicated_placement(scheme, stages, scheme.replicas(1));
      if (*std::max_element(placement.begin(), placement.end()) + 1 == devices) return stages;
    } catch (const UserError&) {
    }
  }
  throw UserError(fmt::format("scheme {} cannot be placed on {} devices", scheme.type(), devices));
}

/// `layers` Linear(width)+ReLU blocks cut evenly into `count` stages, seeded identically for
/// every schedule; `replicas` copies of them whose stages all-reduce through `world`.
struct Pipeline {
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<std::unique_ptr<GradientRoute>> routes;
  std::vector<StageSlot> slots;
  Pipeline(const Options& o, const Scheme& scheme, int count, int replicas, World& world) {
    auto source = std::make_shared<ConfigSource>("bench");
    const auto sgd = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load("{type: sgd, lr: 0.01}"), source, "o"));
    const int per_stage = o.layers / count;
    for (int k = 0; k < replicas * count; ++k) {
      torch::manual_seed(k % count);  // the replicas of a stage start alike
      const int r = k % count;
      StageSpec spec;
      spec.index = r;
      spec.count = count;
      for (int l = 0; l < per_stage; ++l) {
        spec.blocks.push_back({fmt::format("linear{}_{}", r, l), torch::nn::AnyModule(torch::nn::Linear(o.width, o.width))});
        spec.blocks.push_back({fmt::format("relu{}_{}", r, l), torch::nn::AnyModule(torch::nn::ReLU())});
      }
      spec.first_block = static_cast<size_t>(r * per_stage * 2);
      if (r + 1 == count) spec.loss = std::make_shared<CrossEntropyLoss>();
      stages.push_back(std::make_unique<Stage>(std::move(spec)));
      stages.back()->set_optimizer(sgd->make(stages.back()->parameters()));
      policies.push_back(scheme.make_policy(*stages.back()));
      routes.push_back(scheme.add_ons()->route(*stages.back()));
      StageSlot slot;
      slot.stage = stages.back().get();
      slot.policy = policies.back().get();
      slot.route = routes.back().get();
      slots.push_back(slot);
    }
    if (replicas < 2) return;
    for (int r = 0; r < count; ++r) {
      const std::shared_ptr<AllReduce> collective = world.all_reduce(GradientPlan::replicas_of(r, replicas));
      for (int k = 0; k < replicas; ++k) {
        StageSlot& slot = slots[static_cast<size_t>(k * count + r)];
        collective->add_rank(k, slot.stage->parameters());
        slot.all_reduce = collective;
        slot.replica = k;
      }
    }
  }
};

class Data : public Feed {
 public:
  explicit Data(const Options& o)
      : x_(at::randn({o.batch / o.chunks, o.width})), y_(at::zeros({o.batch / o.chunks}, at::kLong)), share_(1.0 / o.chunks) {}
  at::Tensor input(int) override { return x_; }
  at::Tensor target(int) override { return y_; }
  double loss_scale(int) override { return share_; }
  void on_result(int, const MicroBatchResult&) override {}

 private:
  at::Tensor x_, y_;
  double share_;
};

std::unique_ptr<Executor> make_executor(const std::string& yaml) {
  auto source = std::make_shared<ConfigSource>("bench");
  return Registry<Executor>::get().create(ConfigNode(YAML::Load(yaml), source, "executor"));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One schedule's sequential and threaded runs.
struct Case {
  std::string name;
  std::unique_ptr<Scheme> scheme;
  Schedule schedule;
  std::unique_ptr<Pipeline> seq, thr;
  std::unique_ptr<Executor> sequential, threaded;
  std::vector<double> seq_times, thr_times;

  double time(Executor& e, Pipeline& p, Data& data, int steps) {
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) e.run(schedule, p.slots, data, RunMode::Train);
    return std::chrono::duration<double>(Clock::now() - start).count() / steps;
  }
};

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  Options o;
  po::options_description desc("pipelab_bench_schedules: sequential vs threaded on 2 devices, for several schedules");
  desc.add_options()("help", "this help")("width", po::value(&o.width)->default_value(o.width), "layer width")(
      "layers", po::value(&o.layers)->default_value(o.layers), "Linear layers in the whole model")(
      "batch", po::value(&o.batch)->default_value(o.batch), "mini-batch size")(
      "chunks", po::value(&o.chunks)->default_value(o.chunks), "micro-batches m")(
      "steps", po::value(&o.steps)->default_value(o.steps), "steps per timing")(
      "rounds", po::value(&o.rounds)->default_value(o.rounds), "interleaved rounds (the median is reported)")(
      "schemes", po::value(&o.schemes)->default_value(o.schemes), "comma-separated schemes");
  po::variables_map vm;
  if (const auto code = pipelab::bench::parse_command_line(argc, argv, desc, vm)) return *code;
  at::set_num_threads(1);  // sequential: one core; threaded: one per device thread
  Data data(o);
  std::vector<Case> cases;
  std::stringstream names(o.schemes);
  std::string name;
  while (std::getline(names, name, ',')) {
    Case c;
    c.name = name;
    c.scheme = make_scheme(name, o);
    const int stages = stages_on(*c.scheme, o.devices);
    const int replicas = c.scheme->replicas(1);
    c.schedule = with_communication(
        replicated_schedule(*c.scheme, stages, equal_units(c.scheme->micro_batches(), replicas)));
    validate_schedule(c.schedule);
    c.sequential = make_executor("{type: sequential}");
    c.threaded = make_executor("{type: threaded, intra_op_threads: 1}");
    c.seq = std::make_unique<Pipeline>(o, *c.scheme, stages, replicas, c.sequential->world());
    c.thr = std::make_unique<Pipeline>(o, *c.scheme, stages, replicas, c.threaded->world());
    c.time(*c.sequential, *c.seq, data, 1);  // warm-up: allocator, threads
    c.time(*c.threaded, *c.thr, data, 1);
    cases.push_back(std::move(c));
  }
  for (int r = 0; r < o.rounds; ++r) {
    for (Case& c : cases) {
      c.seq_times.push_back(c.time(*c.sequential, *c.seq, data, o.steps));
      c.thr_times.push_back(c.time(*c.threaded, *c.thr, data, o.steps));
    }
  }
  std::cout << fmt::format(
      "{} devices, m = {}, batch {}, {} x Linear({}) in all, 1 intra-op thread per device; median of {} rounds\n\n",
      o.devices, o.chunks, o.batch, o.layers, o.width, o.rounds);
  std::cout << "schedule                 stages  sequential  threaded  speed-up  unit-cost prediction  measured-cost "
               "prediction\n";
  for (Case& c : cases) {
    const double s = median(c.seq_times), t = median(c.thr_times);
    const int stages = c.schedule.stages();
    const Timeline unit = simulate_timeline(c.schedule, CostModel::split(stages, 1, 1, 1));
    double busy = 0;
    for (const double b : unit.busy) busy += b;
    // The sequential run's per-action means, replayed on the devices (transfer time 0).
    c.sequential->stats().reset(stages);
    c.time(*c.sequential, *c.seq, data, o.steps);
    const ExecStats& st = c.sequential->stats();
    const double predicted = simulate_timeline(c.schedule, st.cost_model()).makespan;
    std::cout << fmt::format("{:<24} {:>6}  {:>7.2f} ms  {:>5.2f} ms  {:>7.2f}x  {:>10.2f}x (bubble {:.3f})  {:>8.2f} ms\n",
                             c.name, stages, s * 1e3, t * 1e3, s / t, busy / unit.makespan, unit.bubble_fraction,
                             predicted * 1e3);
  }
  return 0;
}
