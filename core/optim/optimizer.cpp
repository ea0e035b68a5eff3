#include "core/optim/optimizer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace pipelab {

Optimizer::Optimizer(std::vector<at::Tensor> params, double lr)
    : params_(std::move(params)), last_grad_(params_.size()), last_coupled_(params_.size()), lr_(lr) {}

void Optimizer::step() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& g = params_[i].grad();
    if (!g.defined()) continue;
    // Update through .data(): it shares the storage but not autograd's version counter, so
    // the graphs of micro-batches still in flight (1F1B) read the new values in their
    // backward instead of failing, as PyTorch <= 1.4 did (docs/schemes.md F3, Q13).
    at::Tensor data = params_[i].data();
    last_grad_[i] = g;
    last_coupled_[i] = update(i, data, g);
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
