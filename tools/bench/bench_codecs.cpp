/// pipelab_bench_codecs: encode + decode time of every boundary codec on one activation-like
/// tensor, against a plain copy of the same tensor, on one thread, interleaved in rounds;
/// and each codec's bytes against the float32 tensor's.
///
///   pipelab_bench_codecs [--elements 1048576] [--rounds 7]
///
/// Printed per codec: the median milliseconds per million elements of encode, of decode and of
/// both, that over a copy's, and the wire ratio (the parts' bytes / the tensor's). The goal of
/// docs/compression.md: sort_quant 8-bit encode + decode within 10 ms per million floats.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "core/compress/codec.h"
#include "core/config/yaml_file.h"
#include "tools/bench/bench_cli.h"

namespace {

using pipelab::Codec;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::unique_ptr<Codec> make(const std::string& yaml) {
  auto source = std::make_shared<pipelab::ConfigSource>("bench");
  return pipelab::Registry<Codec>::get().create(pipelab::ConfigNode(pipelab::parse_yaml(yaml, "bench"), source, "codec"));
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  int64_t elements = 1 << 20;
  int rounds = 7;
  po::options_description desc("pipelab_bench_codecs: encode + decode time per million elements against a copy");
  desc.add_options()("help,h", "show this help")("elements", po::value(&elements)->default_value(elements),
                                                  "elements of the activation (a [64, N/64] float32 tensor)")(
      "rounds", po::value(&rounds)->default_value(rounds), "interleaved rounds (the median is printed)");
  po::variables_map vm;
  if (auto code = pipelab::bench::parse_command_line(argc, argv, desc, vm)) return *code;
  at::set_num_threads(1);
  at::manual_seed(0);
  // Post-ReLU-like activations: half zeros, the rest half-normal (the shape of what crosses
  // a CNN's or an MLP's boundaries).
  const at::Tensor x = at::relu(at::randn({64, std::max<int64_t>(1, elements / 64)}, at::kFloat));
  const double millions = static_cast<double>(x.numel()) / 1e6;
  const std::vector<std::pair<std::string, std::string>> codecs{
      {"sort_quant SQ16 (12+4)", "{type: sort_quant, q: 12, s: 4}"},
      {"sort_quant SQ12 (9+3)", "{type: sort_quant, q: 9, s: 3}"},
      {"sort_quant SQ8 (6+2)", "{type: sort_quant, q: 6, s: 2}"},
      {"sort_quant SQ4 (2+2)", "{type: sort_quant, q: 2, s: 2}"},
      {"sort_quant SQ8 fast", "{type: sort_quant, q: 6, s: 2, fast: true}"},
      {"uniform 4-bit", "{type: uniform, bits: 4}"},
      {"cast bf16", "{type: cast, dtype: bf16}"},
      {"topk 10%", "{type: topk, fraction: 0.1}"},
      {"fixpoint 8-bit", "{type: fixpoint, bits: 8}"},
      {"aq_sgd 4-bit", "{type: aq_sgd, bits: 4}"},
  };
  std::map<std::string, std::vector<double>> encode, decode;
  std::map<std::string, double> ratio;
  std::vector<double> copy;
  // One row per example (AQ-SGD keys its history by them).
  const pipelab::CodecCall call{0, false, 0, true, at::arange(x.size(0), at::kLong)};
  for (int r = 0; r < rounds; ++r) {
    auto t = Clock::now();
    at::Tensor c = x.clone();
    copy.push_back(seconds_since(t) * 1e3 / millions);
    for (const auto& [name, yaml] : codecs) {
      auto codec = make(yaml);
      auto receiver = codec->copy();
      codec->bind({"bench.send", x.size(0), ""});
      receiver->bind({"bench.recv", x.size(0), ""});
      // A first message passes a warm-up (AQ-SGD's exact first visit): the steady state is timed.
      receiver->decode(codec->encode(x, call), x.sizes(), x.scalar_type(), call);
      t = Clock::now();
      std::vector<at::Tensor> parts = codec->encode(x, call);
      encode[name].push_back(seconds_since(t) * 1e3 / millions);
      t = Clock::now();
      at::Tensor back = receiver->decode(parts, x.sizes(), x.scalar_type(), call);
      decode[name].push_back(seconds_since(t) * 1e3 / millions);
      int64_t bytes = 0;
      for (const at::Tensor& p : parts) bytes += static_cast<int64_t>(p.nbytes());
      ratio[name] = static_cast<double>(bytes) / static_cast<double>(x.nbytes());
    }
  }
  const double copy_ms = median(copy);
  std::printf("%lld float32 elements, 1 thread, medians of %d interleaved rounds; a copy: %.3f ms per million\n",
              static_cast<long long>(x.numel()), rounds, copy_ms);
  std::printf("%-24s %10s %10s %10s %12s %10s\n", "codec", "encode ms", "decode ms", "both ms", "both / copy",
              "wire ratio");
  for (const auto& [name, yaml] : codecs) {
    const double e = median(encode[name]), d = median(decode[name]);
    std::printf("%-24s %10.2f %10.2f %10.2f %12.1f %10.4f\n", name.c_str(), e, d, e + d, (e + d) / copy_ms, ratio[name]);
  }
  return 0;
}
