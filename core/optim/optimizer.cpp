#include "core/optim/optimizer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace pipelab {

Optimizer::Optimizer(std::vector<at::Tensor> params, double lr)
    : params_(std::move(params)), last_grad_(params_.size()), lr_(lr) {}

void Optimizer::step() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    last_grad_[i] = update(i, p, g);
  }
  ++steps_;
}

void Optimizer::zero_grad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

at::Tensor find_state(const std::vector<std::pair<std::string, at::Tensor>>& state, size_t i,
                      const std::string& name) {
  const std::string key = std::to_string(i) + "." + name;
  for (const auto& [k, v] : state) {
    if (k == key) return v;
  }
  return {};
}

}  // namespace pipelab
