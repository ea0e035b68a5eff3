#include "core/model/model.h"

#include "core/util/seed.h"

#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

namespace pipelab {

torch::Tensor Loss::correct(const torch::Tensor& output, const torch::Tensor& target) const {
  torch::NoGradGuard no_grad;
  return output.argmax(-1).eq(target).sum();
}

torch::Tensor CrossEntropyLoss::compute(const torch::Tensor& output, const torch::Tensor& target) const {
  if (output.dim() == 2) return torch::nn::functional::cross_entropy(output, target);
  return torch::nn::functional::cross_entropy(output.flatten(0, -2), target.flatten());
}

int64_t predicted_targets(const torch::Tensor& target) { return target.ne(kIgnoredTarget).sum().item<int64_t>(); }

torch::Tensor Loss::compute_predicted(const torch::Tensor& output, const torch::Tensor& target) const {
  return compute(output, target);
}

torch::Tensor CrossEntropyLoss::compute_predicted(const torch::Tensor& output, const torch::Tensor& target) const {
  if (output.dim() == 2) return compute(output, target);
  // A sequence segment of padding alone predicts nothing: its loss is 0, not 0 / 0.
  namespace F = torch::nn::functional;
  const at::Tensor sum =
      F::cross_entropy(output.flatten(0, -2), target.flatten(), F::CrossEntropyFuncOptions().reduction(torch::kSum));
  return sum / target.ne(kIgnoredTarget).sum().clamp_min(1);
}

int64_t DataSpec::targets_per_example() const {
  int64_t n = 1;
  for (const int64_t d : target_shape) n *= d;
  return n;
}

uint64_t block_seed(uint64_t seed, size_t index) { return mix_seed(seed, 0xB10C, index); }

Block build_block(const ModelDef& def, size_t index, uint64_t seed) {
  torch::manual_seed(block_seed(seed, index));
  return {def.blocks.at(index).name, def.blocks.at(index).make(), def.blocks.at(index).io};
}

Dataflow dataflow(const ModelDef& def, const std::string& model) {
  std::vector<std::pair<std::string, BlockIO>> ios;
  for (const BlockRecipe& b : def.blocks) ios.emplace_back(b.name, b.io);
  return check_dataflow(ios, model);
}


std::string shape_text(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace pipelab
