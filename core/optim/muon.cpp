/// Muon, as torch.optim.Muon (torch 2.15; docs/schemes.md, "Muon"): for a 2-D
/// weight W with gradient g, B <- lerp(B, g, 1 - mu); u = lerp(g, B, mu) with Nesterov, else
/// B; O = NS_k(u) in bf16 (Newton-Schulz with the quintic (a, b, c), docs/schemes.md, "Notation and optimizers"); W <-
/// W (1 - lr lambda); W <- W - lr rho O, rho from `adjust_lr` (Muon's lr ratio, docs/schemes.md, "Notation and
/// optimizers"). The ATen calls and the scalars' double arithmetic are the reference code's, so a CPU run gives its
/// bits (docs/schemes.md, "Notation and optimizers").
///
/// Muon updates matrices only. Every other parameter (biases, norms' gains, 1-D or 4-D
/// tensors) goes to `fallback`, another optimizer section (commonly AdamW; Muon's routing,
/// docs/schemes.md, "Notation and optimizers"), whose learning rate follows the schedule in proportion. Without a
/// fallback such a parameter is refused when the stage's optimizer is made.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/optim/fallback.h"
#include "core/optim/optimizer.h"
#include "core/util/error.h"

namespace pipelab {

namespace {

enum class AdjustLr { Original, MatchRmsAdamw, SpectralUnclamped };

/// (a, b, c): exactly three numbers.
struct ThreeCoefficients {
  std::string operator()(const std::vector<double>& c) const {
    return c.size() == 3 ? "" : "three numbers (a, b, c), e.g. [3.4445, -4.775, 2.0315]";
  }
};

struct MuonOptions {
  double lr = 1e-3;
  double weight_decay = 0.1;
  double momentum = 0.95;
  bool nesterov = true;
  std::vector<double> ns_coefficients{3.4445, -4.7750, 2.0315};
  double eps = 1e-7;
  int64_t ns_steps = 5;
  AdjustLr adjust_lr = AdjustLr::Original;
  std::optional<OptimizerSection> fallback;
  template <class V>
  void fields(V& v) {
    v("lr", lr, "learning rate gamma (torch.optim.Muon: 1e-3)", in_range(0, 1e30));
    v("weight_decay", weight_decay, "decoupled weight decay lambda, applied with the unadjusted lr", non_negative);
    // torch accepts mu >= 1 (docs/schemes.md, "Quirks"); a buffer that grows is refused here.
    v("momentum", momentum, "momentum mu of the buffer B <- lerp(B, g, 1 - mu)", in_half_open(0, 1));
    v("nesterov", nesterov, "orthogonalise lerp(g, B, mu) instead of B");
    v("ns_coefficients", ns_coefficients, "Newton-Schulz quintic coefficients (a, b, c)", ThreeCoefficients{});
    v("eps", eps, "floor of the Frobenius norm the update is divided by", positive);
    v("ns_steps", ns_steps, "Newton-Schulz iterations", InRange{1, 99});
    v.choice("adjust_lr", adjust_lr,
             Choices<AdjustLr>{{"original", AdjustLr::Original},
                               {"match_rms_adamw", AdjustLr::MatchRmsAdamw},
                               {"spectral_unclamped", AdjustLr::SpectralUnclamped}},
             "lr ratio rho of an A x B weight: sqrt(max(1, A/B)), 0.2 sqrt(max(A, B)) or sqrt(A/B)");
    v("fallback", fallback, "the optimizer of every parameter that is not a matrix (e.g. {type: adamw, lr: 3.0e-4})");
  }
};

/// Muon's lr ratio (docs/schemes.md, "Notation and optimizers") with torch's double arithmetic (A / B is Python's true
/// division).
double lr_ratio(AdjustLr mode, const at::Tensor& w) {
  const double a = static_cast<double>(w.size(0)), b = static_cast<double>(w.size(1));
  switch (mode) {
    case AdjustLr::Original: return std::sqrt(std::max(1.0, a / b));
    case AdjustLr::MatchRmsAdamw: return 0.2 * std::sqrt(std::max(a, b));
    case AdjustLr::SpectralUnclamped: return std::sqrt(a / b);
  }
  return 1.0;
}

/// Newton-Schulz (docs/schemes.md, "Notation and optimizers"): k iterations on a bf16 copy of u (the wider way round),
/// as torch's _zeropower_via_newtonschulz.
at::Tensor newton_schulz(const at::Tensor& u, const std::vector<double>& abc, int64_t steps, double eps) {
  const bool tall = u.size(0) > u.size(1);
  at::Tensor x = u.to(at::kBFloat16, /*non_blocking=*/false, /*copy=*/true);
  if (tall) x = x.t();
  x.div_(x.norm().clamp(eps));
  for (int64_t k = 0; k < steps; ++k) {
    const at::Tensor gram = x.mm(x.t());
    const at::Tensor update = at::addmm(gram, gram, gram, /*beta=*/abc[1], /*alpha=*/abc[2]);
    x = at::addmm(x, update, x, /*beta=*/abc[0]);
  }
  return tall ? x.t() : x;
}

/// Per parameter, whether Muon updates it itself: the matrices.
std::vector<bool> matrices(const std::vector<at::Tensor>& params) {
  std::vector<bool> out;
  for (const at::Tensor& p : params) out.push_back(p.dim() == 2);
  return out;
}

class Muon : public Optimizer {
 public:
  Muon(std::vector<at::Tensor> params, const MuonOptions& o, const Component& section)
      : Optimizer(std::move(params), o.lr), o_(o), buffers_(params_.size()), updates_(params_.size()),
        fallback_(params_, matrices(params_), o_.fallback, section, "Muon updates matrices only") {}

  /// The latest update's direction rho O, whatever the kind asked (as Adam's): a weight
  /// predictor (SpecTrain, PipeOptim) then extrapolates along Muon's own last step. That
  /// pairing is pipelab's, not a reference's; the predictors written for SGD's or Adam's
  /// state alone (FTPipe, XPipe's Adam form, Gap-Aware) refuse Muon.
  at::Tensor direction(size_t i, const DirectionRequest& request) const override {
    if (fallback_.owns(i)) return fallback_.direction(i, request);
    at::Tensor& o = updates_.at(i);
    if (!o.defined() && buffers_.at(i).defined() && last_grad_.at(i).defined()) {
      // After a resume: the same O again from what the checkpoint restored (the buffer after
      // the update and the gradient it consumed), so that a predictor reads the
      // uninterrupted run's direction.
      o = newton_schulz(nesterov_input(last_grad_[i], buffers_[i]), o_.ns_coefficients, o_.ns_steps, o_.eps);
    }
    return o.defined() ? o.to(params_[i].scalar_type()) * lr_ratio(o_.adjust_lr, params_[i]) : at::Tensor();
  }
  double decoupled_decay() const override { return o_.weight_decay; }
  void set_steps(int64_t steps) override {
    Optimizer::set_steps(steps);
    fallback_.set_steps(steps);
  }

  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (buffers_[i].defined()) out.emplace_back(std::to_string(i) + ".momentum_buffer", buffers_[i]);
    }
    fallback_.append_state(out);
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    for (const auto& [name, t] : state) {
      const size_t dot = name.find('.');
      const size_t i = std::stoul(name.substr(0, dot));
      if (i < params_.size() && !fallback_.owns(i) && name.substr(dot + 1) == "momentum_buffer") {
        buffers_[i] = t.to(params_[i].options()).clone();
      }
    }
    fallback_.load_state(state);
  }

 protected:
  at::Tensor update(size_t i, at::Tensor& p, const at::Tensor& grad) override {
    at::Tensor& buf = buffers_[i];
    if (!buf.defined()) buf = at::zeros_like(grad);
    buf.lerp_(grad, 1.0 - o_.momentum);
    updates_[i] = newton_schulz(nesterov_input(grad, buf), o_.ns_coefficients, o_.ns_steps, o_.eps);
    p.mul_(1.0 - lr_ * o_.weight_decay);
    p.add_(updates_[i], -(lr_ * lr_ratio(o_.adjust_lr, p)));
    return grad;
  }

  std::vector<at::Tensor> update_all(const std::vector<size_t>& index, std::vector<at::Tensor>& params,
                                     const std::vector<at::Tensor>& grads) override {
    std::vector<at::Tensor> consumed;
    bool others = false;
    for (size_t k = 0; k < index.size(); ++k) {
      if (fallback_.owns(index[k])) {
        others = true;
        consumed.push_back(grads[k]);
      } else {
        consumed.push_back(update(index[k], params[k], grads[k]));
      }
    }
    if (others) fallback_.step(lr_, o_.lr, steps_);
    return consumed;
  }

 private:
  MuonOptions o_;
  /// What Newton-Schulz orthogonalises: lerp(g, B, mu) with Nesterov, else B.
  at::Tensor nesterov_input(const at::Tensor& grad, const at::Tensor& buf) const {
    return o_.nesterov ? grad.lerp(buf, o_.momentum) : buf;
  }

  std::vector<at::Tensor> buffers_;
  mutable std::vector<at::Tensor> updates_;  ///< the latest O; made again from the state after a resume
  Fallback fallback_;  ///< every parameter that is not a matrix
};

class MuonFactory : public Configured<OptimizerFactory, MuonOptions> {
 public:
  using Configured::Configured;
  std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const override {
    return std::make_unique<Muon>(std::move(params), options_, *this);
  }
  double base_lr() const override { return options_.lr; }
  /// A matrix keeps its momentum buffer; each step orthogonalises it by Newton-Schulz
  /// (newton_schulz above), whose products the simulator prices: per iteration, on the wide
  /// way round (m <= n), the Gram matrix X X^T (2 m^2 n), the polynomial gram (b + c gram)
  /// (2 m^3) and its product with X (2 m^2 n); its kernels are the bf16 copy, the norm, its
  /// clamp and the division, and three products per iteration. The rest goes to `fallback`.
  StepCost step_cost(const std::string& name, const std::vector<int64_t>& shape) const override {
    if (shape.size() != 2) {
      return options_.fallback ? options_.fallback->factory->step_cost(name, shape)
                               : StepCost{};  // refused when the stage's optimizer is made
    }
    const double m = static_cast<double>(std::min(shape[0], shape[1]));
    const double n = static_cast<double>(std::max(shape[0], shape[1]));
    const auto steps = static_cast<double>(options_.ns_steps);
    return {m * n, steps * (4 * m * m * n + 2 * m * m * m), 4 + 3 * steps};
  }
};

}  // namespace

PIPELAB_REGISTER(OptimizerFactory, MuonFactory, "muon",
                 "Muon: Newton-Schulz orthogonalised momentum for matrices (torch.optim.Muon), a fallback "
                 "optimizer for the rest");

}  // namespace pipelab
