#include "core/optim/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>
#include <torch/csrc/autograd/grad_mode.h>

namespace pipelab {

StepCost OptimizerFactory::step_cost(const std::string& /*name*/, const std::vector<int64_t>& shape) const {
  // The copies of a vector of 4096 values the state of one step holds, whatever the optimizer.
  at::Tensor p = at::zeros({4096}, at::kFloat).set_requires_grad(true);
  const std::unique_ptr<Optimizer> optimizer = make({p});
  p.mutable_grad() = at::ones({4096}, at::kFloat);
  optimizer->step();
  double bytes = 0;
  for (const auto& [key, t] : optimizer->state()) bytes += static_cast<double>(t.nbytes());
  double elements = 1;
  for (const int64_t n : shape) elements *= static_cast<double>(n);
  return {std::round(bytes / static_cast<double>(p.nbytes())) * elements, 0};
}

Optimizer::Optimizer(std::vector<at::Tensor> params, double lr)
    : params_(std::move(params)), last_grad_(params_.size()), last_coupled_(params_.size()), lr_(lr) {}

void Optimizer::step() {
  at::NoGradGuard no_grad;
  std::vector<size_t> index;
  std::vector<at::Tensor> data, grads;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& g = params_[i].grad();
    if (!g.defined()) continue;
    // Update through .data(): it shares the storage but not autograd's version counter, so the
    // graphs of micro-batches still in flight (1F1B) read the new values in their backward instead
    // of failing, as PyTorch <= 1.4 did (docs/schemes.md, "Notation and optimizers"'s mixed-version backward;
    // docs/schemes.md, "Quirks").
    index.push_back(i);
    data.push_back(params_[i].data());
    grads.push_back(g);
    last_grad_[i] = g;
  }
  if (!index.empty()) {
    const std::vector<at::Tensor> consumed = update_all(index, data, grads);
    for (size_t k = 0; k < index.size(); ++k) last_coupled_[index[k]] = consumed[k];
  }
  ++steps_;
}

std::vector<at::Tensor> Optimizer::update_all(const std::vector<size_t>& index, std::vector<at::Tensor>& params,
                                              const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> consumed;
  consumed.reserve(index.size());
  for (size_t k = 0; k < index.size(); ++k) consumed.push_back(update(index[k], params[k], grads[k]));
  return consumed;
}

void Optimizer::zero_grad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

std::vector<std::pair<std::string, at::Tensor>> Optimizer::last_gradients() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (last_grad_[i].defined()) out.emplace_back(std::to_string(i) + ".last_gradient", last_grad_[i]);
    if (last_coupled_[i].defined()) out.emplace_back(std::to_string(i) + ".last_coupled_gradient", last_coupled_[i]);
  }
  return out;
}

void Optimizer::load_last_gradients(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor g = find_state(state, i, "last_gradient");
    const at::Tensor c = find_state(state, i, "last_coupled_gradient");
    last_grad_[i] = g.defined() ? g.to(params_[i].options()).clone() : at::Tensor();
    last_coupled_[i] = c.defined() ? c.to(params_[i].options()).clone() : at::Tensor();
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
