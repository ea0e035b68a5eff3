#include "tools/describe/model_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "core/util/error.h"
#include "core/model/flop_counter.h"
#include "core/model/meta_device.h"

namespace pipelab {

std::vector<BlockProfile> profile_blocks(const ModelDef& def, const DataSpec& data, uint64_t seed, bool meta) {
  ProfileBlocks build(def, seed, meta);
  return profile_blocks(def, data, build);
}

std::vector<BlockProfile> profile_blocks_from_shapes(const ModelDef& def, const DataSpec& data, uint64_t seed) {
  try {
    return profile_blocks(def, data, seed, /*meta=*/true);
  } catch (const MetaUnsupported&) {
  } catch (const c10::Error&) {
  }
  return profile_blocks(def, data, seed, /*meta=*/false);
}

std::vector<BlockProfile> profile_blocks(const ModelDef& def, const DataSpec& data, ProfileBlocks& build) {
  const bool meta = build.meta();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape{1};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  LiveSet live(torch::zeros(shape, torch::TensorOptions(data.integer_input ? torch::kLong : torch::kFloat).device(build.device())));
  std::vector<BlockProfile> out;
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    Block block = build(i);
    block.module.ptr()->eval();
    BlockProfile p;
    p.name = block.name;
    if (!block.io.plain()) p.io = block.io.str();
    p.parameters = count_parameters(*block.module.ptr());
    for (const auto& kv : block.module.ptr()->named_parameters()) {
      p.parameter_sizes.emplace_back(kv.key(), kv.value().numel());
      p.parameter_shapes.push_back(kv.value().sizes().vec());
    }
    {
      FlopCounter counter;
      std::set<const void*> weights;
      for (const at::Tensor& w : block.module.ptr()->parameters()) {
        if (w.has_storage()) weights.insert(w.storage().unsafeGetStorageImpl());
      }
      counter.set_weights(std::move(weights));
      live.run(block);
      p.flops = counter.flops();
      p.weight_flops = counter.weight_flops();
      p.class_flops = counter.by_class();
      p.class_calls = counter.calls_by_class();
      p.class_bytes = counter.operand_bytes_by_class();
      p.memory_bytes = counter.memory_bytes();
      p.kernels = counter.kernels;
      if (meta) {
        for (const auto& [op, flops] : counter.by_operator()) check_meta_faithful(op);
      }
    }
    p.output_shape = live.get("x").sizes().slice(1).vec();
    for (size_t k = 0; k < live.names().size(); ++k) {
      const torch::Tensor& t = live.values()[k];
      p.live.push_back({live.names()[k], t.sizes().slice(1).vec(), static_cast<int64_t>(t.nbytes()), t.is_floating_point()});
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<StageProfile> stage_totals(const std::vector<BlockProfile>& blocks, const std::vector<int>& balance) {
  PIPELAB_ASSERT(std::accumulate(balance.begin(), balance.end(), 0) == static_cast<int>(blocks.size()),
                 "a balance of {} blocks for a model of {}", std::accumulate(balance.begin(), balance.end(), 0),
                 blocks.size());
  std::vector<StageProfile> out;
  int next = 0;
  for (const int count : balance) {
    StageProfile s;
    s.first = next;
    s.count = count;
    for (int k = 0; k < count; ++k, ++next) {
      s.parameters += blocks[static_cast<size_t>(next)].parameters;
      s.flops += blocks[static_cast<size_t>(next)].flops;
    }
    out.push_back(s);
  }
  return out;
}

double imbalance(const std::vector<int64_t>& values) {
  if (values.empty()) return 0;
  const double sum = static_cast<double>(std::accumulate(values.begin(), values.end(), int64_t{0}));
  if (sum == 0) return 0;
  return static_cast<double>(*std::max_element(values.begin(), values.end())) / (sum / static_cast<double>(values.size()));
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

namespace {

double share(int64_t part, int64_t whole) { return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole); }

/// The block's name, and what it reads and writes unless that is one tensor.
std::string label(const BlockProfile& b) { return b.io.empty() ? b.name : b.name + " " + b.io; }

}  // namespace

std::string render_profile(const std::vector<BlockProfile>& blocks, const std::vector<StageProfile>& stages,
                           const std::string& partition) {
  int64_t params = 0, flops = 0;
  size_t name_width = 5, shape_width = 12;
  for (const BlockProfile& b : blocks) {
    params += b.parameters;
    flops += b.flops;
    name_width = std::max(name_width, label(b).size());
    shape_width = std::max(shape_width, shape_text(b.output_shape).size());
  }
  std::string out = fmt::format("{:>5}  {:<{}}  {:<{}}  {:>13}  {:>17}\n", "block", "name", name_width, "output shape",
                                shape_width, "parameters", "forward FLOPs");
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockProfile& b = blocks[i];
    out += fmt::format("{:>5}  {:<{}}  {:<{}}  {:>13}  {:>17}\n", i, label(b), name_width, shape_text(b.output_shape),
                       shape_width, with_commas(b.parameters), with_commas(b.flops));
  }
  out += fmt::format("{:>5}  {:<{}}  {:<{}}  {:>13}  {:>17}\n", "total", "", name_width, "", shape_width,
                     with_commas(params), with_commas(flops));
  if (stages.empty()) return out;
  out += fmt::format("\npartition: {}\n", partition);
  out += fmt::format("{:>5}  {:<24}  {:>13}  {:>6}  {:>17}  {:>6}\n", "stage", "blocks", "parameters", "share",
                     "forward FLOPs", "share");
  std::vector<int64_t> stage_params, stage_flops;
  for (size_t r = 0; r < stages.size(); ++r) {
    const StageProfile& s = stages[r];
    const std::string range =
        s.count == 1 ? fmt::format("{} {}", s.first, blocks[static_cast<size_t>(s.first)].name)
                     : fmt::format("{}-{} {}..{}", s.first, s.first + s.count - 1, blocks[static_cast<size_t>(s.first)].name,
                                   blocks[static_cast<size_t>(s.first + s.count - 1)].name);
    out += fmt::format("{:>5}  {:<24}  {:>13}  {:>5.1f}%  {:>17}  {:>5.1f}%\n", r, range, with_commas(s.parameters),
                       share(s.parameters, params), with_commas(s.flops), share(s.flops, flops));
    stage_params.push_back(s.parameters);
    stage_flops.push_back(s.flops);
  }
  out += fmt::format("imbalance (max/mean over stages): parameters {:.2f}, forward FLOPs {:.2f}\n",
                     imbalance(stage_params), imbalance(stage_flops));
  // What crosses each boundary: the live tensors there, float32 features as profiled; each
  // floating one's gradient goes back with the same size.
  out += "\ntensors between stages, per example (float32 features; each floating one's gradient comes back the same size):\n";
  const auto tensors = [](const BlockProfile& b) {
    std::vector<std::string> parts;
    int64_t total = 0;
    for (const TensorProfile& t : b.live) {
      parts.push_back(fmt::format("{} {} {} B", t.name, shape_text(t.shape), with_commas(t.bytes)));
      total += t.bytes;
    }
    std::string text = fmt::format("{}", fmt::join(parts, ", "));
    if (parts.size() > 1) text += fmt::format(" (total {} B)", with_commas(total));
    return text;
  };
  std::vector<std::pair<std::string, std::string>> rows;
  size_t width = 8;
  for (size_t r = 0; r < stages.size(); ++r) {
    const StageProfile& st = stages[r];
    rows.emplace_back(r == 0 ? "the data" : tensors(blocks[static_cast<size_t>(st.first - 1)]),
                      r + 1 == stages.size() ? "(the loss)" : tensors(blocks[static_cast<size_t>(st.first + st.count - 1)]));
    width = std::max(width, rows.back().first.size());
  }
  out += fmt::format("{:>5}  {:<{}}  {}\n", "stage", "receives", width, "sends");
  for (size_t r = 0; r < rows.size(); ++r) out += fmt::format("{:>5}  {:<{}}  {}\n", r, rows[r].first, width, rows[r].second);
  return out;
}

}  // namespace pipelab
