/// Benchmark (not a test): pipelab on one GPU against the Python code a researcher would
/// otherwise write, in one call so that both see the same GPU, driver and torch.
///
/// 1. ResNet (default 50) at 224x224, `single`, for each configuration BATCH:AMP:LAYOUT,
///    next to tools/bench/eager_train.py (a plain PyTorch eager loop on torchvision's ResNet
///    with the same optimizer, data path and logging). Rounds alternate between the two
///    (each round: the Python process, then pipelab); the median samples/s of each is
///    reported with the ratio pipelab / eager (goal >= 1.0), with run.trace on (the default:
///    CUDA events around each action) and off.
/// 2. 4-stage GPipe (chunks 8, checkpoint except_last) of the same ResNet on the one GPU:
///    the sequential executor against the threaded one (a thread and a CUDA stream per stage).
///
/// 3. With --profile DIR, after the rest: LibTorch's profiler (Kineto: host operators and
///    CUDA kernels) over one short `single` run of the first configuration, written as a
///    Chrome trace DIR/pipelab.json, and the same for the eager loop (DIR/eager.json), so
///    that each step's GPU idle time and host work can be compared offline.
///
///   build/pipelab_bench_gpu [--depth 50] [--configs 64:none:cl,...] [--steps 20] [--rounds 2]
///                           [--python python3] [--skip-eager] [--skip-gpipe] [--profile DIR]
#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/device/device.h"
#include "core/train/runner.h"
#include "tools/bench/bench_cli.h"

namespace {

namespace fs = std::filesystem;

struct Config {
  int64_t batch = 64;
  std::string amp = "none";
  bool channels_last = true;
  std::string label() const { return fmt::format("{}:{}:{}", batch, amp, channels_last ? "cl" : "cf"); }
};

std::vector<Config> parse_configs(const std::string& text) {
  std::vector<Config> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    Config c;
    const size_t a = item.find(':'), b = item.rfind(':');
    if (a == std::string::npos || a == b) throw std::runtime_error("--configs: expected BATCH:AMP:LAYOUT, got " + item);
    c.batch = std::stoll(item.substr(0, a));
    c.amp = item.substr(a + 1, b - a - 1);
    c.channels_last = item.substr(b + 1) == "cl";
    out.push_back(c);
  }
  return out;
}

/// Samples/s of pipelab's runner over the second of two epochs of `steps` steps (the first
/// warms up cuDNN and the caching allocator), with `scheme` and `executor` sections.
double pipelab_samples_per_second(int depth, const Config& c, int steps, const std::string& scheme,
                                  const std::string& executor, int stages, bool trace = true) {
  const std::string yaml = fmt::format(
      "model: {{type: resnet, depth: {}, stem: imagenet}}\n"
      "dataset: {{type: synthetic, samples: {}, test_samples: {}, shape: [3, 224, 224], classes: 1000}}\n"
      "partition: {{stages: {}}}\n"
      "scheme: {}\n"
      "optimizer: {{type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 5.0e-4}}\n"
      "run: {{epochs: 2, batch_size: {}, seed: 0, devices: [cuda:0], amp: {}, channels_last: {}, progress: false,\n"
      "      executor: {}, trace: {}}}\n",
      depth, c.batch * steps, c.batch, stages, scheme, c.batch, c.amp, c.channels_last ? "true" : "false", executor,
      trace ? "true" : "false");
  const std::string out = (fs::temp_directory_path() / "pipelab-bench-gpu").string();
  pipelab::Experiment e = pipelab::Experiment::parse(yaml, "bench_gpu.yaml", {"run.output=" + out});
  pipelab::RunnerOptions options;
  options.overwrite = true;
  options.quiet = true;
  options.summary = false;
  const pipelab::RunSummary s = pipelab::Runner(e, options).run();
  fs::remove_all(out);
  return s.history.at(1).samples_per_second;
}

/// samples/s per configuration label from one eager_train.py process.
std::map<std::string, double> eager_samples_per_second(const std::string& python, const std::string& script, int depth,
                                                       const std::string& configs, int steps) {
  const std::string command =
      fmt::format("{} {} --depth {} --configs {} --steps {} 2>&1", python, script, depth, configs, steps);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + command);
  std::map<std::string, double> out;
  char line[4096];
  std::string all;
  while (std::fgets(line, sizeof line, pipe)) {
    const std::string l = line;
    all += l;
    // {"implementation": "eager", ..., "batch": 64, "amp": "none", "channels_last": true, ..., "samples_per_second": X, ...}
    if (l.find("\"implementation\": \"eager\"") == std::string::npos) continue;
    const auto field = [&](const std::string& key) {
      const size_t at = l.find("\"" + key + "\": ");
      const size_t from = at + key.size() + 4;
      return l.substr(from, l.find_first_of(",}", from) - from);
    };
    std::string amp = field("amp");
    amp = amp.substr(1, amp.size() - 2);
    out[fmt::format("{}:{}:{}", field("batch"), amp, field("channels_last") == "true" ? "cl" : "cf")] =
        std::stod(field("samples_per_second"));
  }
  if (::pclose(pipe) != 0) throw std::runtime_error("the eager loop failed:\n" + all);
  return out;
}

/// Runs `fn` under LibTorch's Kineto profiler (host operators of this thread, CUDA kernels of
/// every stream) and writes the Chrome trace to `path`.
template <class Fn>
void profiled(const std::string& path, Fn&& fn) {
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  const std::set<prof::ActivityType> activities{prof::ActivityType::CPU, prof::ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  fn();
  torch::autograd::profiler::disableProfiler()->save(path);
}

/// Chrome traces of one short `single` run of `c` in pipelab (DIR/pipelab.json) and in the
/// eager loop (DIR/eager.json). Last in main(): the profiler's CUDA tracing (CUPTI) can be
/// slow or unavailable, and the table comes first.
void write_profiles(const fs::path& dir, int depth, const Config& c, const std::string& python,
                    const std::string& script) {
  fs::create_directories(dir);
  profiled((dir / "pipelab.json").string(),
           [&] { pipelab_samples_per_second(depth, c, 4, "{type: single}", "sequential", 1); });
  const std::string command = fmt::format("{} {} --depth {} --configs {} --steps 4 --warmup 4 --profile {}", python,
                                          script, depth, c.label(), (dir / "eager.json").string());
  if (std::system(command.c_str()) != 0) std::cerr << "the eager profile failed: " << command << "\n";
  std::cout << "profiles of " << c.label() << " written to " << dir.string() << "\n" << std::flush;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  int depth = 50, steps = 20, rounds = 2, gpipe_batch = 128;
  std::string configs = "64:none:cl,128:none:cl,64:bf16:cl,128:bf16:cl,128:bf16:cf", python = "python3";
  std::string script = std::string(PIPELAB_SOURCE_DIR) + "/tools/bench/eager_train.py";
  po::options_description desc("pipelab_bench_gpu: pipelab vs PyTorch eager on one GPU; GPipe executors");
  desc.add_options()("help,h", "this help")("depth", po::value(&depth)->default_value(depth), "ResNet depth")(
      "configs", po::value(&configs)->default_value(configs), "BATCH:AMP:LAYOUT list (AMP none|bf16|fp16, LAYOUT cl|cf)")(
      "steps", po::value(&steps)->default_value(steps), "timed steps per configuration")(
      "rounds", po::value(&rounds)->default_value(rounds), "alternating rounds (the median is reported)")(
      "python", po::value(&python)->default_value(python), "Python with torch and torchvision")(
      "script", po::value(&script)->default_value(script), "the eager loop")(
      "gpipe-batch", po::value(&gpipe_batch)->default_value(gpipe_batch), "mini-batch of the GPipe comparison")(
      "skip-eager", "pipelab's figures only")("skip-gpipe", "no GPipe executor comparison")(
      "profile", po::value<std::string>(), "write Chrome traces of the first configuration to this folder");
  po::variables_map vm;
  if (const auto code = pipelab::bench::parse_command_line(argc, argv, desc, vm)) return *code;
  if (!pipelab::device::cuda_available()) {
    std::cerr << "pipelab_bench_gpu: no CUDA device\n";
    return 2;
  }
  const std::vector<Config> list = parse_configs(configs);
  std::cout << fmt::format("{}; ResNet-{} 224x224, SGD momentum 0.9, {} timed steps, {} rounds\n",
                           pipelab::device::describe_runtime(), depth, steps, rounds)
            << std::flush;
  // run.trace (the default) times each action with CUDA events; the second figure is without.
  std::map<std::string, std::vector<double>> lab, untraced, eager;
  for (int r = 0; r < rounds; ++r) {
    if (!vm.count("skip-eager")) {
      for (const auto& [label, v] : eager_samples_per_second(python, script, depth, configs, steps)) {
        eager[label].push_back(v);
        std::cout << fmt::format("  round {} {:<14} eager   {:8.1f} samples/s\n", r + 1, label, v) << std::flush;
      }
    }
    for (const Config& c : list) {
      lab[c.label()].push_back(pipelab_samples_per_second(depth, c, steps, "{type: single}", "sequential", 1));
      untraced[c.label()].push_back(
          pipelab_samples_per_second(depth, c, steps, "{type: single}", "sequential", 1, /*trace=*/false));
      std::cout << fmt::format("  round {} {:<14} pipelab {:8.1f} samples/s, trace off {:8.1f}\n", r + 1, c.label(),
                               lab[c.label()].back(), untraced[c.label()].back())
                << std::flush;
    }
  }
  std::cout << fmt::format(
      "\n| batch:amp:layout | pipelab samples/s | trace off | eager samples/s | pipelab / eager | trace off / eager |\n"
      "|---|---:|---:|---:|---:|---:|\n");
  const auto ratio = [](double a, double b) { return b > 0 ? fmt::format("{:.3f}", a / b) : std::string("-"); };
  for (const Config& c : list) {
    const double l = median(lab[c.label()]), u = median(untraced[c.label()]), e = median(eager[c.label()]);
    std::cout << fmt::format("| {} | {:.1f} | {:.1f} | {} | {} | {} |\n", c.label(), l, u,
                             e > 0 ? fmt::format("{:.1f}", e) : "-", ratio(l, e), ratio(u, e));
  }
  if (!vm.count("skip-gpipe")) {
    Config c{gpipe_batch, "none", true};
    const std::string scheme = "{type: gpipe, chunks: 8, checkpoint: except_last}";
    std::vector<double> seq, thr;
    for (int r = 0; r < rounds; ++r) {
      seq.push_back(pipelab_samples_per_second(depth, c, steps / 2, scheme, "sequential", 4));
      thr.push_back(pipelab_samples_per_second(depth, c, steps / 2, scheme, "{type: threaded}", 4));
    }
    const double s = median(seq), t = median(thr);
    std::cout << fmt::format("\n4-stage GPipe (chunks 8, checkpoint except_last), ResNet-{}, batch {}, one GPU:\n"
                             "  sequential {:.1f} samples/s, threaded (4 streams) {:.1f} samples/s, ratio {:.3f}\n",
                             depth, gpipe_batch, s, t, t / s);
  }
  if (vm.count("profile")) write_profiles(vm["profile"].as<std::string>(), depth, list.front(), python, script);
  return 0;
}
