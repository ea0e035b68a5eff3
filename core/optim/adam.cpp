/// Adam (L2-coupled weight decay) and AdamW (decoupled), as torch.optim.Adam/AdamW
/// (docs/schemes.md, "Notation and optimizers"): m = b1 m + (1-b1) G; u = b2 u + (1-b2) G^2;
/// W <- W - lr * m_hat / (sqrt(u_hat) + eps). AdamW first scales W by (1 - lr lambda).
#include <ATen/ATen.h>

#include <cmath>

#include "core/optim/optimizer.h"

namespace pipelab {
namespace {

/// Adam's betas: exactly two numbers in [0, 1).
struct TwoRates {
  std::string operator()(const std::vector<double>& b) const {
    const bool ok = b.size() == 2 && b[0] >= 0 && b[0] < 1 && b[1] >= 0 && b[1] < 1;
    return ok ? "" : "two numbers in [0, 1), e.g. [0.9, 0.999]";
  }
};

struct AdamOptions {
  double lr = 0;
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  template <class V>
  void fields(V& v) {
    v.required("lr", lr, "base learning rate", in_open_low(0, 1e30));
    v("betas", betas, "(beta1, beta2) moment decay rates", TwoRates{});
    v("eps", eps, "epsilon added to sqrt(u_hat)", positive);
    v("weight_decay", weight_decay, "weight decay lambda", non_negative);
  }
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<at::Tensor> params, const AdamOptions& o, bool decoupled)
      : Optimizer(std::move(params), o.lr), o_(o), decoupled_(decoupled), m_(params_.size()),
        u_(params_.size()) {}

  /// m_hat / (sqrt(u_hat) + eps) whatever the kind (Adam has no separate buffer form).
  at::Tensor direction(size_t i, const DirectionRequest& request) const override {
    if (!m_.at(i).defined()) return {};
    const double t = static_cast<double>(steps_);
    const double bc1 = 1 - std::pow(o_.betas[0], t);
    const double bc2 = 1 - std::pow(o_.betas[1], t);
    return (m_[i] / bc1) / ((u_[i] / bc2).sqrt_().add_(request.eps.value_or(o_.eps)));
  }

  std::optional<double> beta1() const override { return o_.betas[0]; }
  void set_beta1(double beta1) override { o_.betas[0] = beta1; }
  double decoupled_decay() const override { return decoupled_ ? o_.weight_decay : 0; }
  std::optional<AdamSettings> adam_settings() const override {
    return AdamSettings{o_.betas[0], o_.betas[1], o_.eps, o_.weight_decay, decoupled_};
  }

  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < m_.size(); ++i) {
      if (!m_[i].defined()) continue;
      out.emplace_back(std::to_string(i) + ".exp_avg", m_[i]);
      out.emplace_back(std::to_string(i) + ".exp_avg_sq", u_[i]);
    }
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    for (size_t i = 0; i < m_.size(); ++i) {
      at::Tensor m = find_state(state, i, "exp_avg"), u = find_state(state, i, "exp_avg_sq");
      if (m.defined() && u.defined()) {
        m_[i] = m.to(params_[i].options()).clone();
        u_[i] = u.to(params_[i].options()).clone();
      }
    }
  }

 protected:
  at::Tensor update(size_t i, at::Tensor& p, const at::Tensor& grad) override {
    at::Tensor g = grad;
    if (o_.weight_decay != 0) {
      if (decoupled_) {
        p.mul_(1 - lr_ * o_.weight_decay);
      } else {
        g = grad.add(p, o_.weight_decay);
      }
    }
    if (!m_[i].defined()) {
      m_[i] = at::zeros_like(p);
      u_[i] = at::zeros_like(p);
    }
    const double b1 = o_.betas[0], b2 = o_.betas[1];
    m_[i].lerp_(g, 1 - b1);
    u_[i].mul_(b2).addcmul_(g, g, 1 - b2);
    const double t = static_cast<double>(steps_ + 1);
    const double bc1 = 1 - std::pow(b1, t);
    const double bc2_sqrt = std::sqrt(1 - std::pow(b2, t));
    const at::Tensor denom = (u_[i].sqrt() / bc2_sqrt).add_(o_.eps);
    p.addcdiv_(m_[i], denom, -lr_ / bc1);
    return g;
  }

 private:
  AdamOptions o_;
  bool decoupled_;
  std::vector<at::Tensor> m_, u_;
};

template <bool kDecoupled>
class AdamFactory : public Configured<OptimizerFactory, AdamOptions> {
 public:
  using Configured::Configured;
  std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const override {
    return std::make_unique<Adam>(std::move(params), options_, kDecoupled);
  }
  double base_lr() const override { return options_.lr; }
};

}  // namespace

PIPELAB_REGISTER(OptimizerFactory, AdamFactory<false>, "adam",
                 "Adam with L2-coupled weight decay (torch.optim.Adam)");
PIPELAB_REGISTER(OptimizerFactory, AdamFactory<true>, "adamw",
                 "AdamW: Adam with decoupled weight decay (torch.optim.AdamW)");

}  // namespace pipelab
