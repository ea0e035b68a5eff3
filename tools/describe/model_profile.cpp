#include "tools/describe/model_profile.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "core/util/error.h"
#include "core/model/flop_counter.h"

namespace pipelab {

std::vector<BlockProfile> profile_blocks(const ModelDef& def, const DataSpec& data, uint64_t seed) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape{1};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  torch::Tensor x = torch::zeros(shape, data.integer_input ? torch::kLong : torch::kFloat);
  std::vector<BlockProfile> out;
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    Block block = build_block(def, i, seed);
    block.module.ptr()->eval();
    BlockProfile p;
    p.name = block.name;
    p.parameters = count_parameters(*block.module.ptr());
    {
      FlopCounter counter;
      x = block.module.forward(x);
      p.flops = counter.flops();
    }
    p.output_shape = x.sizes().slice(1).vec();
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

}  // namespace

std::string render_profile(const std::vector<BlockProfile>& blocks, const std::vector<StageProfile>& stages,
                           const std::string& partition) {
  int64_t params = 0, flops = 0;
  size_t name_width = 5, shape_width = 12;
  for (const BlockProfile& b : blocks) {
    params += b.parameters;
    flops += b.flops;
    name_width = std::max(name_width, b.name.size());
    shape_width = std::max(shape_width, shape_text(b.output_shape).size());
  }
  std::string out = fmt::format("{:>5}  {:<{}}  {:<{}}  {:>13}  {:>17}\n", "block", "name", name_width, "output shape",
                                shape_width, "parameters", "forward FLOPs");
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockProfile& b = blocks[i];
    out += fmt::format("{:>5}  {:<{}}  {:<{}}  {:>13}  {:>17}\n", i, b.name, name_width, shape_text(b.output_shape),
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
  // What crosses each boundary: one tensor per example today, float32 as profiled; its
  // gradient goes back with the same size.
  out += "\ntensors between stages, per example (float32; each one's gradient comes back the same size):\n";
  out += fmt::format("{:>5}  {:<40}  {}\n", "stage", "receives", "sends");
  const auto tensor = [](const BlockProfile& b) {
    int64_t n = 1;
    for (const int64_t d : b.output_shape) n *= d;
    return fmt::format("activation {} {} B", shape_text(b.output_shape), with_commas(4 * n));
  };
  for (size_t r = 0; r < stages.size(); ++r) {
    const StageProfile& st = stages[r];
    const std::string in = r == 0 ? "the data" : tensor(blocks[static_cast<size_t>(st.first - 1)]);
    const std::string sent = r + 1 == stages.size() ? "(the loss)" : tensor(blocks[static_cast<size_t>(st.first + st.count - 1)]);
    out += fmt::format("{:>5}  {:<40}  {}\n", r, in, sent);
  }
  return out;
}

}  // namespace pipelab
