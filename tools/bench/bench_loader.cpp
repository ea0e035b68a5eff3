/// CIFAR-10 loader throughput with SpecTrain's augmentation (random crop 32 with padding 4,
/// flip, normalise; docs/schemes.md, "SpecTrain: common settings"), measured in one run:
///   1. the loader alone: images/s delivered with 0 (build on demand), 1 and 2 worker threads;
///   2. the loader feeding a small CNN's training steps: samples/s and the share of time the
///      training thread waited for data, per worker count.
/// Uses <data-dir>/cifar10/cifar-10-batches-bin when present, else a synthetic file in the
/// CIFAR binary format.
///
///   build/pipelab_bench_loader [--data-dir D] [--batches N] [--rounds R] [--threads T]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/data/loader.h"
#include "core/model/model.h"

namespace fs = std::filesystem;
using pipelab::Batch;
using pipelab::DataLoader;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// A CIFAR-10 folder: the real one under data_dir, else 10,000 random records written to
/// `scratch` in the binary format.
std::string cifar_dir(const std::string& data_dir, const std::string& scratch, bool& synthetic) {
  const fs::path real = fs::path(data_dir) / "cifar10" / "cifar-10-batches-bin";
  synthetic = !fs::is_regular_file(real / "data_batch_1.bin");
  if (!synthetic) return data_dir;
  const fs::path dir = fs::path(scratch) / "cifar10" / "cifar-10-batches-bin";
  fs::create_directories(dir);
  std::string bytes(10000 * 3073, '\0');
  uint64_t state = 1;
  for (char& c : bytes) c = static_cast<char>((state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
  for (size_t r = 0; r < 10000; ++r) bytes[r * 3073] = static_cast<char>(r % 10);
  for (const char* name : {"data_batch_1.bin", "test_batch.bin"}) std::ofstream(dir / name, std::ios::binary) << bytes;
  return scratch;
}

pipelab::LoaderOptions loader_options(int workers) {
  pipelab::LoaderOptions o{128, true, true, 0};
  o.prefetch.workers = workers;
  return o;
}

/// Images per second the loader delivers when nothing else runs.
double loader_alone(const std::shared_ptr<pipelab::Dataset>& train, int workers, int64_t batches, int epoch) {
  DataLoader loader(train, loader_options(workers));
  loader.start_epoch(epoch);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t j = 0; j < batches; ++j) loader.batch(j % loader.batches());
  return static_cast<double>(batches * 128) / seconds_since(start);
}

/// A small CNN (pipelab's `cnn` model) trained with plain SGD.
struct Trainer {
  std::vector<pipelab::Block> blocks;
  std::shared_ptr<pipelab::Loss> loss;
  std::vector<torch::Tensor> params;
  explicit Trainer(const pipelab::DataSpec& spec) {
    const auto factory = pipelab::Registry<pipelab::ModelFactory>::get().create_default("cnn");
    const pipelab::ModelDef def = factory->define(spec);
    for (size_t i = 0; i < def.blocks.size(); ++i) {
      blocks.push_back(pipelab::build_block(def, i, 0));
      for (const auto& p : blocks.back().module.ptr()->parameters()) params.push_back(p);
    }
    loss = def.loss;
  }
  void step(const Batch& b) {
    torch::Tensor x = b.x;
    for (auto& block : blocks) x = block.module.forward(x);
    loss->compute(x, b.y).backward();
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      p.sub_(p.grad(), 0.01);
      p.grad().zero_();
    }
  }
};

/// Training samples per second and the share of it spent waiting for data.
std::pair<double, double> with_training(const std::shared_ptr<pipelab::Dataset>& train, Trainer& trainer, int workers,
                                        int64_t batches, int epoch) {
  DataLoader loader(train, loader_options(workers));
  loader.start_epoch(epoch);
  loader.take_wait_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t j = 0; j < batches; ++j) trainer.step(loader.batch(j % loader.batches()));
  const double total = seconds_since(start);
  return {static_cast<double>(batches * 128) / total, loader.take_wait_seconds() / total};
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  const char* env = std::getenv("PIPELAB_DATA_DIR");
  std::string data_dir = env ? env : std::string(PIPELAB_SOURCE_DIR) + "/../shared/data";
  int64_t batches = 60;
  int rounds = 3;
  int threads = 0;
  po::options_description options("usage: pipelab_bench_loader [options]");
  options.add_options()("help,h", "show this help")("data-dir", po::value(&data_dir), "folder holding cifar10/")(
      "batches", po::value(&batches)->default_value(60), "batches of 128 per measurement")(
      "rounds", po::value(&rounds)->default_value(3), "repetitions (the median is printed)")(
      "threads", po::value(&threads)->default_value(0), "intra-op threads (0: LibTorch's default)");
  const std::string scratch = (fs::temp_directory_path() / "pipelab-bench-loader").string();
  int status = 0;
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(options).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << options;
      return 0;
    }
    if (threads > 0) at::set_num_threads(threads);
    bool synthetic = false;
    auto source = std::make_shared<pipelab::ConfigSource>("bench");
    const auto factory = pipelab::Registry<pipelab::DatasetFactory>::get().create(
        pipelab::ConfigNode(YAML::Load("{type: cifar10}"), source, "dataset"));
    pipelab::DataContext context;
    context.data_dir = cifar_dir(data_dir, scratch, synthetic);
    const pipelab::DatasetSplits data = factory->load(context);
    fmt::print("{}{}\n{} intra-op threads, {} hardware threads, batch 128, {} batches x {} rounds (median)\n",
               data.description, synthetic ? " [synthetic CIFAR-format file]" : "", at::get_num_threads(),
               std::thread::hardware_concurrency(), batches, rounds);
    loader_alone(data.train, 0, 10, 0);  // warm-up
    fmt::print("loader alone (images/s):\n");
    for (const int w : {0, 1, 2}) {
      std::vector<double> r;
      for (int k = 0; k < rounds; ++k) r.push_back(loader_alone(data.train, w, batches, k));
      fmt::print("  {} worker{}  {:9.0f}\n", w, w == 1 ? " " : "s", median(r));
    }
    Trainer trainer(data.spec);
    with_training(data.train, trainer, 0, 5, 0);  // warm-up
    fmt::print("feeding cnn training steps (samples/s, data wait share):\n");
    for (const int w : {0, 1, 2}) {
      std::vector<double> rate, wait;
      for (int k = 0; k < rounds; ++k) {
        const auto [r, f] = with_training(data.train, trainer, w, batches, k);
        rate.push_back(r);
        wait.push_back(f);
      }
      fmt::print("  {} worker{}  {:9.0f}   wait {:5.1f}%\n", w, w == 1 ? " " : "s", median(rate), 100 * median(wait));
    }
  } catch (const po::error& e) {
    std::cerr << e.what() << "\n" << options;
    status = 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    status = 1;
  }
  fs::remove_all(scratch);
  return status;
}
