#include "core/weights/weights.h"

#include <ATen/ATen.h>

#include <cmath>

namespace pipelab {

Weights copy_weights(Stage& stage) {
  at::NoGradGuard no_grad;
  Weights out;
  for (const at::Tensor& p : stage.parameters()) out.push_back(p.detach().clone());
  return out;
}

void write_weights(Stage& stage, const Weights& w) {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> params = stage.parameters();
  PIPELAB_ASSERT(params.size() == w.size(), "{} weights for {} parameters", w.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) params[i].data().copy_(w[i]);
}

void average_gradients(Stage& stage, int count) {
  if (count <= 1) return;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : stage.parameters()) {
    if (p.grad().defined()) p.grad().div_(static_cast<double>(count));
  }
}

double distance(const Weights& a, const Weights& b) {
  PIPELAB_ASSERT(a.size() == b.size(), "{} vs {} tensors", a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (a[i].to(at::kDouble) - b[i].to(at::kDouble)).pow(2).sum().item<double>();
  return std::sqrt(sum);
}

void WeightSwap::swap_in(const Weights& w) {
  PIPELAB_ASSERT(!active_, "weights swapped in twice");
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> params = stage_.parameters();
  if (live_.size() != params.size()) {
    live_.clear();
    for (const at::Tensor& p : params) live_.push_back(at::empty_like(p));
  }
  for (size_t i = 0; i < params.size(); ++i) live_[i].copy_(params[i].data());
  write_weights(stage_, w);
  active_ = true;
}

void WeightSwap::restore() {
  if (!active_) return;
  write_weights(stage_, live_);
  active_ = false;
}

Weights predict_weights(Stage& stage, double lr, double steps, const DirectionRequest& request, double decay) {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> params = stage.parameters();
  Weights out;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor w = params[i].detach();
    at::Tensor d = stage.optimizer().direction(i, request);
    if (!d.defined()) {
      out.push_back(w.clone());
      continue;
    }
    if (decay != 0) d = d + w * decay;
    out.push_back(w - d * (lr * steps));
  }
  return out;
}

}  // namespace pipelab
