/// Benchmark (not a test): pipelab on one GPU against the Python code a researcher would
/// otherwise write, in one call so that both see the same GPU, driver and torch.
///
/// 0. With --small-gpipe STEPS, first: a 4-stage GPipe of 8 x Linear(256), 8 micro-batches of
///    32 rows, every stage on the one GPU (kernels of microseconds: the step is paced by its
///    host), sequential and threaded executors, each with and without run.cuda_graphs.
/// 1. ResNet (default 50) at 224x224, `single`, for each configuration BATCH:AMP:LAYOUT,
///    next to tools/bench/eager_train.py (a plain PyTorch eager loop on torchvision's ResNet
///    with the same optimizer, data path and logging). Rounds alternate between the two
///    (each round: the Python process, then pipelab eager and with run.cuda_graphs); the
///    median samples/s of each is reported with the ratios to eager (goal >= 1.0). run.trace
///    is on (the default: CUDA events around each action); --trace-off adds a run without.
///    pipelab's batches are pinned (run.loader.pin_memory: auto) and built by --workers loader
///    threads (default 4); --eager-pinned adds the eager loop with its whole dataset pinned
///    before timing, a second baseline.
/// 2. 4-stage GPipe (chunks 8, checkpoint except_last) of the same ResNet on the one GPU:
///    the sequential executor against the threaded one (a thread and a CUDA stream per stage).
/// 3. With --host-profile DIR: LibTorch's profiler over one short `single` run of the first
///    configuration, host operators only (no CUPTI), DIR/pipelab-host.json, and the same for
///    the eager loop (DIR/eager-host.json): which operators each issues, and what they cost
///    (tools/bench/gpu_trace_summary.py --host). With --profile DIR, last: the same with the
///    CUDA kernels (DIR/pipelab.json, DIR/eager.json).
///
///   build/pipelab_bench_gpu [--depth 50] [--configs 64:bf16:cl,...] [--steps 20] [--rounds 2]
///                           [--small-gpipe STEPS] [--python python3] [--skip-eager] [--skip-resnet]
///                           [--skip-gpipe] [--trace-off] [--eager-pinned] [--workers 4]
///                           [--host-profile DIR] [--profile DIR]
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
#include "core/run/runner.h"
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

/// Samples/s of pipelab's runner on the experiment `yaml` over its second epoch (the first
/// warms up cuDNN, the caching allocator and, with run.cuda_graphs, captures the graphs).
double samples_per_second(const std::string& yaml) {
  const std::string out = (fs::temp_directory_path() / "pipelab-bench-gpu").string();
  pipelab::Experiment e = pipelab::Experiment::parse(yaml, "bench_gpu.yaml", {"run.output=" + out});
  pipelab::RunnerOptions options;
  options.overwrite = true;
  options.quiet = true;
  options.summary = false;
  const pipelab::RunSummary s = pipelab::Runner(e, options).run();
  fs::remove_all(out);
  const pipelab::EpochMetrics& m = s.history.at(1);
  // A loader that cannot keep up makes this a data benchmark: say so beside the figure.
  if (m.data_wait_fraction > 0.02) {
    std::cout << fmt::format("    (the step waited for its batch {:.0f}% of the epoch: raise --workers)\n",
                             100 * m.data_wait_fraction);
  }
  return m.samples_per_second;
}

/// Loader threads of the ResNet runs (--workers): one (the 2-core default) cannot gather and
/// pin 224x224 batches as fast as an H200 trains on them (2026-11-27: 52-62 ms steps against 37).
int g_workers = 4;

/// ResNet-`depth` at 224x224 in configuration `c` with `scheme` and `executor` sections,
/// two epochs of `steps` steps.
double pipelab_samples_per_second(int depth, const Config& c, int steps, const std::string& scheme,
                                  const std::string& executor, int stages, bool trace = true, bool graphs = false) {
  return samples_per_second(fmt::format(
      "model: {{type: resnet, depth: {}, stem: imagenet}}\n"
      "dataset: {{type: synthetic, samples: {}, test_samples: {}, shape: [3, 224, 224], classes: 1000}}\n"
      "partition: {{stages: {}}}\n"
      "scheme: {}\n"
      "optimizer: {{type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 5.0e-4}}\n"
      "run: {{epochs: 2, batch_size: {}, seed: 0, devices: [cuda:0], amp: {}, channels_last: {}, progress: false,\n"
      "      executor: {}, trace: {}, cuda_graphs: {}, loader: {{workers: {}}}}}\n",
      depth, c.batch * steps, c.batch, stages, scheme, c.batch, c.amp, c.channels_last ? "true" : "false", executor,
      trace ? "true" : "false", graphs ? "true" : "false", g_workers));
}

/// The small-kernel pipeline: 4-stage GPipe of 8 x Linear(256) (+ReLU), 8 micro-batches of
/// 32 rows, every stage on cuda:0 (two linear layers a stage: kernels of microseconds, so a
/// step's pace is its host's). run.trace off: no CUDA events around the actions.
double small_gpipe_samples_per_second(int steps, const std::string& executor, bool graphs) {
  return samples_per_second(fmt::format(
      "model: {{type: mlp, sizes: [256, 256, 256, 256, 256, 256, 256, 256, 256]}}\n"
      "dataset: {{type: synthetic, samples: {}, test_samples: 256, shape: [256], classes: 256}}\n"
      "partition: {{stages: 4}}\n"
      "scheme: {{type: gpipe, chunks: 8}}\n"
      "optimizer: {{type: sgd, lr: 0.01, momentum: 0.9}}\n"
      "run: {{epochs: 2, batch_size: 256, seed: 0, devices: [cuda:0], progress: false, trace: false,\n"
      "      executor: {}, cuda_graphs: {}}}\n",
      256 * steps, executor, graphs ? "true" : "false"));
}

/// samples/s per configuration label from one eager_train.py process.
std::map<std::string, double> eager_samples_per_second(const std::string& python, const std::string& script, int depth,
                                                       const std::string& configs, int steps, bool pinned = false) {
  const std::string command = fmt::format("{} {} --depth {} --configs {} --steps {}{} 2>&1", python, script, depth,
                                          configs, steps, pinned ? " --pin-memory" : "");
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

/// Runs `fn` under LibTorch's Kineto profiler and writes the Chrome trace to `path`: host
/// operators of this thread, and with `cuda` the CUDA kernels of every stream (CUPTI, which
/// hung or crawled on one machine: the host-only trace needs none of it).
template <class Fn>
void profiled(const std::string& path, bool cuda, Fn&& fn) {
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda) activities.insert(prof::ActivityType::CUDA);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  fn();
  torch::autograd::profiler::disableProfiler()->save(path);
}

/// Chrome traces of one short `single` run of `c` in pipelab (DIR/pipelab[-host].json) and in
/// the eager loop (DIR/eager[-host].json), host operators only unless `cuda`; tools/bench/
/// gpu_trace_summary.py compares them. Last in main(): the table comes first.
void write_profiles(const fs::path& dir, int depth, const Config& c, const std::string& python,
                    const std::string& script, bool cuda) {
  fs::create_directories(dir);
  const std::string suffix = cuda ? "" : "-host";
  // run.trace off: its memory meter takes the profiler's thread-local slot (memory_meter.h).
  profiled((dir / ("pipelab" + suffix + ".json")).string(), cuda,
           [&] { pipelab_samples_per_second(depth, c, 4, "{type: single}", "sequential", 1, /*trace=*/false); });
  const std::string command =
      fmt::format("{} {} --depth {} --configs {} --steps 4 --warmup 4 --profile {}{}", python, script, depth,
                  c.label(), (dir / ("eager" + suffix + ".json")).string(), cuda ? "" : " --host-only");
  if (std::system(command.c_str()) != 0) std::cerr << "the eager profile failed: " << command << "\n";
  std::cout << "profiles of " << c.label() << " written to " << dir.string() << "\n" << std::flush;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

/// The ResNet table: per round the eager loop (all configurations), then pipelab's `single`
/// per configuration: eager execution, captured (run.cuda_graphs), and with --trace-off
/// without the CUDA events around each action.
void resnet_table(const std::vector<Config>& list, int depth, int steps, int rounds, bool eager_on, bool trace_off,
                  bool eager_pinned, const std::string& python, const std::string& script, const std::string& configs) {
  std::map<std::string, std::vector<double>> lab, graphs, untraced, eager, pinned;
  for (int r = 0; r < rounds; ++r) {
    if (eager_on) {
      for (const auto& [label, v] : eager_samples_per_second(python, script, depth, configs, steps)) {
        eager[label].push_back(v);
        std::cout << fmt::format("  round {} {:<14} eager   {:8.1f} samples/s\n", r + 1, label, v) << std::flush;
      }
    }
    if (eager_on && eager_pinned) {
      for (const auto& [label, v] : eager_samples_per_second(python, script, depth, configs, steps, true)) {
        pinned[label].push_back(v);
        std::cout << fmt::format("  round {} {:<14} eager, pinned batches {:8.1f} samples/s\n", r + 1, label, v)
                  << std::flush;
      }
    }
    for (const Config& c : list) {
      const std::string l = c.label();
      lab[l].push_back(pipelab_samples_per_second(depth, c, steps, "{type: single}", "sequential", 1));
      graphs[l].push_back(pipelab_samples_per_second(depth, c, steps, "{type: single}", "sequential", 1, true, true));
      if (trace_off) {
        untraced[l].push_back(pipelab_samples_per_second(depth, c, steps, "{type: single}", "sequential", 1, false));
      }
      std::cout << fmt::format("  round {} {:<14} pipelab {:8.1f} samples/s, cuda graphs {:8.1f}{}\n", r + 1, l,
                               lab[l].back(), graphs[l].back(),
                               trace_off ? fmt::format(", trace off {:8.1f}", untraced[l].back()) : "")
                << std::flush;
    }
  }
  const auto ratio = [](double a, double b) { return b > 0 ? fmt::format("{:.3f}", a / b) : std::string("-"); };
  std::cout << "\n| batch:amp:layout | eager samples/s | pipelab | cuda graphs | pipelab / eager | graphs / eager |"
               " graphs / pipelab |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const Config& c : list) {
    const std::string l = c.label();
    const double p = median(lab[l]), g = median(graphs[l]), e = median(eager[l]);
    std::cout << fmt::format("| {} | {} | {:.1f} | {:.1f} | {} | {} | {} |\n", l,
                             e > 0 ? fmt::format("{:.1f}", e) : "-", p, g, ratio(p, e), ratio(g, e), ratio(g, p));
  }
  if (trace_off) {
    for (const Config& c : list) {
      std::cout << fmt::format("  {}: trace off {:.1f} samples/s\n", c.label(), median(untraced[c.label()]));
    }
  }
  for (const Config& c : list) {
    if (pinned[c.label()].empty()) continue;
    const double e = median(pinned[c.label()]);
    std::cout << fmt::format("  {}: eager with pinned batches {:.1f} samples/s; pipelab / it {}, graphs / it {}\n",
                             c.label(), e, ratio(median(lab[c.label()]), e), ratio(median(graphs[c.label()]), e));
  }
  std::cout << std::flush;
}

/// The small-kernel GPipe on one GPU: sequential and threaded executors, each with and
/// without CUDA graphs, in alternating rounds.
void small_gpipe(int steps, int rounds) {
  std::map<std::string, std::vector<double>> v;
  const std::vector<std::pair<std::string, std::string>> executors{{"sequential", "sequential"},
                                                                   {"threaded", "{type: threaded}"}};
  for (int r = 0; r < rounds; ++r) {
    for (const auto& [name, yaml] : executors) {
      for (const bool g : {false, true}) {
        const std::string key = name + (g ? "+graphs" : "");
        v[key].push_back(small_gpipe_samples_per_second(steps, yaml, g));
        std::cout << fmt::format("  round {} {:<19} {:9.1f} samples/s\n", r + 1, key, v[key].back()) << std::flush;
      }
    }
  }
  const double s = median(v["sequential"]), sg = median(v["sequential+graphs"]), t = median(v["threaded"]),
               tg = median(v["threaded+graphs"]);
  std::cout << fmt::format(
      "\n4-stage GPipe of 8 x Linear(256), 8 micro-batches of 32, one GPU, samples/s (median of {} rounds):\n"
      "  sequential {:.1f}, sequential + graphs {:.1f} ({:.2f}x)\n"
      "  threaded {:.1f}, threaded + graphs {:.1f} ({:.2f}x); threaded / sequential {:.2f}x, with graphs {:.2f}x\n",
      rounds, s, sg, sg / s, t, tg, tg / t, t / s, tg / sg) << std::flush;
}

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  int depth = 50, steps = 20, rounds = 2, gpipe_batch = 128, small_steps = 0;
  std::string configs = "64:none:cl,128:none:cl,64:bf16:cl,128:bf16:cl,128:bf16:cf", python = "python3";
  std::string script = std::string(PIPELAB_SOURCE_DIR) + "/tools/bench/eager_train.py";
  po::options_description desc("pipelab_bench_gpu: pipelab vs PyTorch eager on one GPU; GPipe executors");
  desc.add_options()("help,h", "this help")("depth", po::value(&depth)->default_value(depth), "ResNet depth")(
      "configs", po::value(&configs)->default_value(configs), "BATCH:AMP:LAYOUT list (AMP none|bf16|fp16, LAYOUT cl|cf)")(
      "steps", po::value(&steps)->default_value(steps), "timed steps per configuration")(
      "rounds", po::value(&rounds)->default_value(rounds), "alternating rounds (the median is reported)")(
      "python", po::value(&python)->default_value(python), "Python with torch and torchvision")(
      "script", po::value(&script)->default_value(script), "the eager loop")(
      "workers", po::value(&g_workers)->default_value(g_workers), "loader threads of pipelab's ResNet runs")(
      "gpipe-batch", po::value(&gpipe_batch)->default_value(gpipe_batch), "mini-batch of the GPipe comparison")(
      "skip-eager", "pipelab's figures only")("skip-gpipe", "no GPipe executor comparison")(
      "skip-resnet", "no ResNet table")("trace-off", "also pipelab with run.trace off")(
      "eager-pinned", "also the eager loop with its batches in pinned memory (pipelab pins them on CUDA)")(
      "small-gpipe", po::value(&small_steps)->default_value(small_steps),
      "steps of the small-kernel GPipe (8 x Linear(256), 4 stages, m = 8) with and without graphs (0: skip)")(
      "host-profile", po::value<std::string>(),
      "write host-only Chrome traces (no CUPTI) of the first configuration to this folder")(
      "profile", po::value<std::string>(), "write Chrome traces with CUDA kernels of the first configuration here");
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
  if (small_steps > 0) small_gpipe(small_steps, rounds);
  if (!vm.count("skip-resnet")) {
    resnet_table(list, depth, steps, rounds, !vm.count("skip-eager"), vm.count("trace-off") > 0,
                 vm.count("eager-pinned") > 0, python, script,
                 configs);
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
  if (vm.count("host-profile")) {
    write_profiles(vm["host-profile"].as<std::string>(), depth, list.front(), python, script, false);
  }
  if (vm.count("profile")) write_profiles(vm["profile"].as<std::string>(), depth, list.front(), python, script, true);
  return 0;
}
