#include "core/weights/gap_aware.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/util/error.h"

namespace pipelab {

void GapAware::before_step(Stage& stage, int64_t staleness, const Weights* stashed) {
  Optimizer& optimizer = stage.optimizer();
  const auto sgd = optimizer.sgd_momentum_and_decay();
  if (!sgd) {
    throw UserError("gap_aware is implemented for SGD (FTPipe's sgd_gap_aware). Fix: use optimizer sgd, or "
                    "gap_aware: off");
  }
  const auto [momentum, decay] = *sgd;
  const std::vector<at::Tensor> params = stage.parameters();
  if (a_.empty()) {
    for (const at::Tensor& p : params) a_.push_back(at::zeros_like(p));
  }
  at::NoGradGuard no_grad;
  const double lr = stage.scheduled_lr();
  lr_max_ = std::max(lr_max_, lr);
  ++count_;
  const double correction = 1 - std::pow(gamma_, static_cast<double>(count_));
  double penalty_sum = 0;
  int64_t elements = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.grad().defined()) continue;
    // FTPipe's running statistic reads the momentum buffer of the previous step (zero before
    // the first), or the current gradient without momentum.
    at::Tensor v = momentum > 0 ? optimizer.direction(i) : p.grad();
    if (!v.defined()) v = at::zeros_like(p);
    a_[i].mul_(gamma_).addcmul_(v, v, 1 - gamma_);
    if (staleness <= 0) continue;
    const at::Tensor c = (a_[i] / correction).sqrt_().add_(eps_).mul_(lr_max_);
    const at::Tensor gap = stashed ? ((*stashed)[i] - p).abs_() : p.grad().abs() * lr;
    const at::Tensor penalty = gap.div_(c).add_(1);
    // SGD will add lambda W itself: feeding g/P + lambda W (1 - P)/P makes it apply (g + lambda W)/P.
    at::Tensor g = p.grad() / penalty;
    if (decay != 0) g.add_(p * decay * (1 - penalty) / penalty);
    p.mutable_grad() = g;
    penalty_sum += penalty.sum().item<double>();
    elements += penalty.numel();
  }
  mean_penalty_ = elements > 0 ? penalty_sum / static_cast<double>(elements) : 1;
}

}  // namespace pipelab
