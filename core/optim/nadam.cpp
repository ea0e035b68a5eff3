/// NAdam as torch.optim.NAdam computes it (torch 2.x `_single_tensor_nadam`; the Nesterov
/// asynchronous pipeline scheme's reference code trains with it, with decoupled weight decay):
///   mu_k = b1 (1 - 0.5 * 0.96^(k psi)),  Pi_k = mu_1 ... mu_k
///   W <- W (1 - lr lambda)            (decoupled)   or   G = g + lambda W   (coupled)
///   m = b1 m + (1 - b1) G;  u = b2 u + (1 - b2) G^2;  den = sqrt(u / (1 - b2^k)) + eps
///   W <- W - lr (1 - mu_k) / (1 - Pi_k) G / den - lr mu_{k+1} / (1 - Pi_k mu_{k+1}) m / den
/// torch keeps Pi in float32 (float64 when that is the default dtype); here it is a double,
/// so results agree with torch's float64 run to about 1e-9.
#include <ATen/ATen.h>

#include <cmath>

#include "core/optim/optimizer.h"

namespace pipelab {
namespace {

struct NadamOptions {
  double lr = 0;
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum_decay = 0.004;
  bool decoupled_weight_decay = false;
  template <class V>
  void fields(V& v) {
    v.required("lr", lr, "base learning rate", in_open_low(0, 1e30));
    v("betas", betas, "(beta1, beta2) moment decay rates, each in [0, 1)", [](const std::vector<double>& b) {
      const bool ok = b.size() == 2 && b[0] >= 0 && b[0] < 1 && b[1] >= 0 && b[1] < 1;
      return ok ? std::string() : std::string("two numbers in [0, 1), e.g. [0.9, 0.999]");
    });
    v("eps", eps, "epsilon added to the bias-corrected sqrt(u)", positive);
    v("weight_decay", weight_decay, "weight decay lambda", non_negative);
    v("momentum_decay", momentum_decay, "psi of the momentum schedule mu_k = b1 (1 - 0.5 * 0.96^(k psi))",
      non_negative);
    v("decoupled_weight_decay", decoupled_weight_decay, "decay the weights directly (as AdamW) instead of adding "
      "lambda W to the gradient");
  }
};

class Nadam : public Optimizer {
 public:
  Nadam(std::vector<at::Tensor> params, const NadamOptions& o)
      : Optimizer(std::move(params), o.lr), o_(o), m_(params_.size()), u_(params_.size()),
        mu_product_(params_.size(), 1.0) {}

  /// The latest update's direction d (W <- W - lr d, without the decoupled decay): both
  /// NAdam terms, with the step's momentum coefficients.
  at::Tensor direction(size_t i, const DirectionRequest& request) const override {
    if (!m_.at(i).defined()) return {};
    const double k = static_cast<double>(steps_);
    const double mu = momentum(k), mu_next = momentum(k + 1), pi = mu_product_[i];
    const at::Tensor den = (u_[i] / (1 - std::pow(o_.betas[1], k))).sqrt_().add_(request.eps.value_or(o_.eps));
    return (last_coupled_.at(i) * ((1 - mu) / (1 - pi)) + m_[i] * (mu_next / (1 - pi * mu_next))) / den;
  }

  std::optional<double> beta1() const override { return o_.betas[0]; }
  void set_beta1(double beta1) override { o_.betas[0] = beta1; }
  double decoupled_decay() const override { return o_.decoupled_weight_decay ? o_.weight_decay : 0; }

  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < m_.size(); ++i) {
      if (!m_[i].defined()) continue;
      out.emplace_back(std::to_string(i) + ".exp_avg", m_[i]);
      out.emplace_back(std::to_string(i) + ".exp_avg_sq", u_[i]);
      out.emplace_back(std::to_string(i) + ".mu_product", at::scalar_tensor(mu_product_[i], at::kDouble));
    }
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    for (size_t i = 0; i < m_.size(); ++i) {
      at::Tensor m = find_state(state, i, "exp_avg"), u = find_state(state, i, "exp_avg_sq");
      at::Tensor pi = find_state(state, i, "mu_product");
      if (m.defined() && u.defined() && pi.defined()) {
        m_[i] = m.to(params_[i].options()).clone();
        u_[i] = u.to(params_[i].options()).clone();
        mu_product_[i] = pi.item<double>();
      }
    }
  }

 protected:
  at::Tensor update(size_t i, at::Tensor& p, const at::Tensor& grad) override {
    at::Tensor g = grad;
    if (o_.weight_decay != 0) {
      if (o_.decoupled_weight_decay) {
        p.mul_(1 - lr_ * o_.weight_decay);
      } else {
        g = grad.add(p, o_.weight_decay);
      }
    }
    if (!m_[i].defined()) {
      m_[i] = at::zeros_like(p);
      u_[i] = at::zeros_like(p);
    }
    const double k = static_cast<double>(steps_ + 1);
    const double mu = momentum(k), mu_next = momentum(k + 1);
    mu_product_[i] *= mu;
    const double pi = mu_product_[i];
    m_[i].lerp_(g, 1 - o_.betas[0]);
    u_[i].mul_(o_.betas[1]).addcmul_(g, g, 1 - o_.betas[1]);
    const at::Tensor den = (u_[i] / (1 - std::pow(o_.betas[1], k))).sqrt_().add_(o_.eps);
    p.addcdiv_(g, den, -lr_ * (1 - mu) / (1 - pi));
    p.addcdiv_(m_[i], den, -lr_ * mu_next / (1 - pi * mu_next));
    return g;
  }

 private:
  double momentum(double k) const { return o_.betas[0] * (1 - 0.5 * std::pow(0.96, k * o_.momentum_decay)); }

  NadamOptions o_;
  std::vector<at::Tensor> m_, u_;
  std::vector<double> mu_product_;
};

class NadamFactory : public Configured<OptimizerFactory, NadamOptions> {
 public:
  using Configured::Configured;
  std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const override {
    return std::make_unique<Nadam>(std::move(params), options_);
  }
  double base_lr() const override { return options_.lr; }
};

}  // namespace

PIPELAB_REGISTER(OptimizerFactory, NadamFactory, "nadam",
                 "NAdam (torch.optim.NAdam), optionally with decoupled weight decay");

}  // namespace pipelab
