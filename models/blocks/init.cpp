#include "models/blocks/init.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

namespace pipelab::models {
namespace {

/// Calls `fn` on every module of type M inside `module` (itself included).
template <class M, class F>
void for_each(torch::nn::Module& module, F fn) {
  for (const auto& m : module.modules()) {
    if (auto* typed = m->as<M>()) fn(*typed);
  }
}

}  // namespace

void init_convs_kaiming_fan_out(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for_each<torch::nn::Conv2dImpl>(module, [](torch::nn::Conv2dImpl& conv) {
    torch::nn::init::kaiming_normal_(conv.weight, 0, torch::kFanOut, torch::kReLU);
    if (conv.bias.defined()) conv.bias.zero_();
  });
}

void init_linears_normal(torch::nn::Module& module, double std) {
  torch::NoGradGuard no_grad;
  for_each<torch::nn::LinearImpl>(module, [std](torch::nn::LinearImpl& linear) {
    linear.weight.normal_(0, std);
    if (linear.bias.defined()) linear.bias.zero_();
  });
}

void init_spectrain(torch::nn::Module& module) {
  init_convs_kaiming_fan_out(module);
  init_linears_normal(module, 0.01);
}

void init_truncated_normal(torch::nn::Module& module, double std) {
  torch::NoGradGuard no_grad;
  for_each<torch::nn::Conv2dImpl>(module, [std](torch::nn::Conv2dImpl& conv) { truncated_normal_(conv.weight, std); });
  for_each<torch::nn::LinearImpl>(module,
                                  [std](torch::nn::LinearImpl& linear) { truncated_normal_(linear.weight, std); });
}

void truncated_normal_(torch::Tensor& t, double std) {
  torch::NoGradGuard no_grad;
  // u ~ U(Phi(-2), Phi(2)) mapped through the normal quantile: sqrt(2) * erfinv(2u - 1).
  const double bound = std::erf(2.0 / std::sqrt(2.0));  // 2 * Phi(2) - 1
  t.uniform_(-bound, bound).erfinv_().mul_(std * std::sqrt(2.0)).clamp_(-2 * std, 2 * std);
}

}  // namespace pipelab::models
