#include "core/nn/batch_norm.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include "core/nn/context.h"
#include "core/util/error.h"

namespace pipelab::nn {

BatchNormImpl::BatchNormImpl(BatchNormOptions options) : options_(options) { reset(); }

void BatchNormImpl::reset() {
  const int64_t c = options_.features;
  if (options_.affine) {
    weight = register_parameter("weight", torch::ones({c}));
    bias = register_parameter("bias", torch::zeros({c}));
  }
  running_mean = register_buffer("running_mean", torch::zeros({c}));
  running_var = register_buffer("running_var", torch::ones({c}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

torch::Tensor BatchNormImpl::forward(const torch::Tensor& x) {
  if (!is_training()) {
    return at::batch_norm(x, weight, bias, running_mean, running_var, false, 0.0, options_.eps,
                          at::globalContext().userEnabledCuDNN());
  }
  if (deferred_ && is_graphed()) {
    throw UserError(
        "run.cuda_graphs cannot capture deferred batch norm: its moments accumulate on the host, one micro-batch "
        "at a time. Fix: set run.cuda_graphs: false, or scheme.deferred_batch_norm: "
        "false");
  }
  if (deferred_ || is_recomputing()) {
    // Normalise with this micro-batch's statistics; running statistics are not touched here.
    if (deferred_ && !is_recomputing()) accumulate(x);
    return at::batch_norm(x, weight, bias, {}, {}, true, 0.0, options_.eps,
                          at::globalContext().userEnabledCuDNN());
  }
  num_batches_tracked.add_(1);
  return at::batch_norm(x, weight, bias, running_mean, running_var, true, options_.momentum,
                        options_.eps, at::globalContext().userEnabledCuDNN());
}

void BatchNormImpl::set_deferred(bool deferred) {
  deferred_ = deferred;
  count_ = 0;
  sum_mean_ = at::Tensor();
  sum_m2_ = at::Tensor();
}

void BatchNormImpl::accumulate(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const int64_t n = x.numel() / x.size(1);
  const auto [var, mean] = at::var_mean(x.detach(), dims, /*correction=*/0, /*keepdim=*/false);
  const at::Tensor m2 = var * static_cast<double>(n);
  if (count_ == 0) {
    sum_mean_ = mean.clone();
    sum_m2_ = m2.clone();
    count_ = n;
    return;
  }
  // Chan et al.'s pairwise update of (count, mean, M2).
  const double na = static_cast<double>(count_), nb = static_cast<double>(n), total = na + nb;
  const at::Tensor delta = mean - sum_mean_;
  sum_mean_.add_(delta, nb / total);
  sum_m2_.add_(m2).add_(delta * delta, na * nb / total);
  count_ += n;
}

void BatchNormImpl::commit(bool unbiased) {
  if (count_ == 0) return;
  torch::NoGradGuard no_grad;
  const double denominator = static_cast<double>(unbiased && count_ > 1 ? count_ - 1 : count_);
  const double m = options_.momentum;
  running_mean.mul_(1 - m).add_(sum_mean_.to(running_mean.dtype()), m);
  running_var.mul_(1 - m).add_((sum_m2_ / denominator).to(running_var.dtype()), m);
  num_batches_tracked.add_(1);
  count_ = 0;
  sum_mean_ = at::Tensor();
  sum_m2_ = at::Tensor();
}

void for_each_batch_norm(torch::nn::Module& module, const std::function<void(BatchNormImpl&)>& fn) {
  for (const auto& m : module.modules(/*include_self=*/true)) {
    if (auto* bn = dynamic_cast<BatchNormImpl*>(m.get())) fn(*bn);
  }
}

}  // namespace pipelab::nn
