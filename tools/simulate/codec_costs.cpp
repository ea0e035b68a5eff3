#include "tools/simulate/codec_costs.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include "tools/simulate/timing.h"

namespace pipelab::sim {

CodecFigures measure_codec(const Codec& codec, double elements, int64_t rows) {
  rows = std::max<int64_t>(1, rows);
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(std::llround(elements / static_cast<double>(rows))));
  // A codec that keeps a history on disk keeps it in a folder of its own, removed after.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pipelab-simulate-" + std::to_string(::getpid()));
  auto sender = codec.copy(), receiver = codec.copy();
  sender->bind({"sim.send", rows, dir.string()});
  receiver->bind({"sim.recv", rows, dir.string()});
  at::Generator gen = at::detail::createCPUGenerator(0);
  const at::Tensor x = at::randn({rows, per}, gen, at::kFloat);
  CodecCall call{0, false, 0, true, at::arange(rows, at::kLong)};
  CodecFigures out;
  std::vector<double> encodes, decodes;
  // Four calls pass AQ-SGD's warm-up (1 epoch by default) and top-k's fresh error feedback;
  // the next three are timed.
  for (int k = 0; k < 7; ++k) {
    std::vector<at::Tensor> parts;
    const double e = seconds_of([&] { parts = sender->encode(x, call); });
    const double d = seconds_of([&] { receiver->decode(parts, x.sizes(), at::kFloat, call); });
    if (k < 4) continue;
    encodes.push_back(e);
    decodes.push_back(d);
    double bytes = 0;
    for (const at::Tensor& p : parts) bytes += static_cast<double>(p.nbytes());
    out.bytes = bytes;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  out.encode_seconds = median(encodes);
  out.decode_seconds = median(decodes);
  return out;
}

namespace {

/// measure_codec, once per codec, size and row count: a planner costs thousands of candidates
/// whose boundaries carry the same few tensor sizes, and each measurement codes a tensor seven
/// times.
CodecFigures measured_once(const Codec& codec, double elements, int64_t rows) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int64_t, int64_t>, CodecFigures> known;
  const auto key = std::make_tuple(YAML::Dump(codec.resolved()), static_cast<int64_t>(std::llround(elements)), rows);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = known.find(key);
    if (it != known.end()) return it->second;
  }
  const CodecFigures f = measure_codec(codec, elements, rows);
  const std::lock_guard<std::mutex> lock(mutex);
  return known.emplace(key, f).first->second;
}

}  // namespace

void apply_compression(SimCosts& c, const CompressionSection& section, double dtype_bytes) {
  if (!section.any() || !c.compression.empty()) return;
  const int stages = static_cast<int>(c.stages.size());
  const BoundaryCodecs where(section, stages, [](int s) { return s; });
  const int64_t rows = static_cast<int64_t>(std::llround(c.micro_batch_size));
  for (int b = 0; b + 1 < stages; ++b) {
    if (!where.compressed(b)) continue;
    StageCosts& near = c.stages[static_cast<size_t>(b)];
    StageCosts& far = c.stages[static_cast<size_t>(b + 1)];
    if (section.activations && near.activation_bytes > 0) {
      const CodecFigures f = measured_once(*section.activations, near.activation_bytes / dtype_bytes, rows);
      near.activation_bytes = f.bytes;
      near.codec_forward_seconds += f.encode_seconds;
      far.codec_forward_seconds += f.decode_seconds;
    }
    if (section.gradients && far.gradient_bytes > 0) {
      const CodecFigures f = measured_once(*section.gradients, far.gradient_bytes / dtype_bytes, rows);
      far.gradient_bytes = f.bytes;
      far.codec_backward_seconds += f.encode_seconds;
      near.codec_backward_seconds += f.decode_seconds;
    }
  }
  c.source += "; boundaries compressed (encoded sizes and codec times measured on this host)";
}

}  // namespace pipelab::sim
