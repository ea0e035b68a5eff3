/// SGD with momentum, dampening, Nesterov and coupled weight decay, exactly as torch.optim.SGD
/// (docs/schemes.md, "Notation and optimizers"): G = g + lambda W; v_1 = G, v_k = mu v + (1 - tau) G;
/// d = G + mu v (Nesterov) or v; W <- W - lr d.
#include <ATen/ATen.h>

#include "core/optim/optimizer.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

struct SgdOptions {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  double weight_decay = 0;
  template <class V>
  void fields(V& v) {
    v.required("lr", lr, "base learning rate", in_open_low(0, 1e30));
    v("momentum", momentum, "momentum factor mu", in_half_open(0, 1));
    v("dampening", dampening, "dampening tau of the momentum", in_range(0, 1));
    v("nesterov", nesterov, "Nesterov momentum");
    v("weight_decay", weight_decay, "L2 penalty lambda (added to the gradient)", non_negative);
  }
  void check(const ConfigNode& node) const {
    if (nesterov && (momentum <= 0 || dampening != 0)) {
      node.child("nesterov").fail("Nesterov momentum needs momentum > 0 and dampening 0",
                                  "set momentum (e.g. 0.9) and dampening: 0, or nesterov: false");
    }
  }
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<at::Tensor> params, const SgdOptions& o)
      : Optimizer(std::move(params), o.lr), o_(o), buffers_(params_.size()) {}

  std::optional<SgdSettings> sgd_settings() const override {
    return SgdSettings{o_.momentum, o_.dampening, o_.weight_decay, o_.nesterov};
  }
  void set_nesterov(bool nesterov) override {
    PIPELAB_ASSERT(!nesterov || (o_.momentum > 0 && o_.dampening == 0),
                   "Nesterov momentum needs momentum > 0 and dampening 0");
    o_.nesterov = nesterov;
  }

  at::Tensor direction(size_t i, const DirectionRequest& request) const override {
    const at::Tensor& g = request.gradient_with_l2 ? last_coupled_.at(i) : last_grad_.at(i);
    if (!g.defined()) return {};
    if (o_.momentum == 0) {
      // No buffer (docs/schemes.md, "spectrain version 1"): the update direction is the coupled gradient G; a
      // one-step-ahead estimate is the gradient; mu v is zero, i.e. no prediction.
      switch (request.kind) {
        case DirectionRequest::Kind::Buffer: return last_coupled_.at(i);
        case DirectionRequest::Kind::OneStepAhead: return g;
        case DirectionRequest::Kind::MomentumOnly: return {};
      }
    }
    const at::Tensor& v = buffers_.at(i);
    switch (request.kind) {
      case DirectionRequest::Kind::Buffer: return v;
      case DirectionRequest::Kind::OneStepAhead: return v * o_.momentum + g * (1 - o_.dampening);
      case DirectionRequest::Kind::MomentumOnly: return v * o_.momentum;
    }
    return v;
  }

  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (buffers_[i].defined()) out.emplace_back(std::to_string(i) + ".momentum_buffer", buffers_[i]);
    }
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      at::Tensor b = find_state(state, i, "momentum_buffer");
      if (b.defined()) buffers_[i] = b.to(params_[i].options()).clone();
    }
  }

 protected:
  at::Tensor update(size_t i, at::Tensor& p, const at::Tensor& grad) override {
    std::vector<at::Tensor> params{p};
    return update_all({i}, params, {grad}).front();
  }

  // The SGD step on all parameters at once, operation by operation: LibTorch's multi-tensor operations
  // (on the CPU, the per-tensor ones).
  std::vector<at::Tensor> update_all(const std::vector<size_t>& index, std::vector<at::Tensor>& params,
                                     const std::vector<at::Tensor>& grads) override {
    std::vector<at::Tensor> d = o_.weight_decay != 0 ? at::_foreach_add(grads, params, o_.weight_decay) : grads;
    const std::vector<at::Tensor> consumed = d;
    if (o_.momentum != 0) {
      std::vector<at::Tensor> old_buffers, old_d, buffers;
      for (size_t k = 0; k < index.size(); ++k) {
        at::Tensor& buf = buffers_[index[k]];
        if (!buf.defined()) {
          buf = d[k].clone();
        } else {
          old_buffers.push_back(buf);
          old_d.push_back(d[k]);
        }
        buffers.push_back(buf);
      }
      if (!old_buffers.empty()) {
        at::_foreach_mul_(old_buffers, o_.momentum);
        at::_foreach_add_(old_buffers, old_d, 1 - o_.dampening);
      }
      d = o_.nesterov ? at::_foreach_add(d, buffers, o_.momentum) : buffers;
    }
    at::_foreach_add_(params, d, -lr_);
    return consumed;
  }

 private:
  SgdOptions o_;
  std::vector<at::Tensor> buffers_;
};

class SgdFactory : public Configured<OptimizerFactory, SgdOptions> {
 public:
  using Configured::Configured;
  std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const override {
    return std::make_unique<Sgd>(std::move(params), options_);
  }
  double base_lr() const override { return options_.lr; }
};

}  // namespace

PIPELAB_REGISTER(OptimizerFactory, SgdFactory, "sgd",
                 "SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD)");

}  // namespace pipelab
