/// `nesterov_async`: the Nesterov method for asynchronous pipeline parallelism (Ajanthan,
/// Ramasinghe, Zuo, Avraham, Long, ICML 2025) as its released code (PluralisResearch/AsyncPP)
/// trains (F27, verified): asynchronous 1F1B with PipeDream weight stashing, stage r holding
/// D - r versions, its forward and its (recomputed) backward reading the version W_{j - w_r},
/// the ring reset to the current weights at every epoch flush; the optimizer is
/// torch.optim.NAdam with decoupled weight decay (here `optimizer: {type: nadam,
/// decoupled_weight_decay: true}`: the code's NAdam is Nesterov's look-ahead plus Adam
/// preconditioning, F28), the gradient clipped to norm 10 per stage before each step (Q47).
///
/// Options, each as the code has it (off in its published runs):
/// - `adaptive_momentum` (F29): stage r's beta1 = beta1 + w_r (0.99 - beta1) / D;
/// - `lr_correction_steps` K (F24, "PipeMare type LR correction"): stage r's k-th step uses
///   lr(k) * w_r^-(1 - min(k/K, 1)), with the LR set by the global step (Q46's default).
/// The paper's own update (F26, second-hand) and its no-stash variant are not implemented.
/// With the recompute of the code, a backward reads exactly its forward's weights, which is
/// what stashing with saved activations computes too.
#include <ATen/ATen.h>

#include <cmath>

#include "core/weights/stashing_policy.h"
#include "schemes/nesterov_async.h"
#include "schemes/pipemare.h"

namespace pipelab {
namespace {

struct NesterovAsyncOptions {
  FlushOption flush;
  double clip = 10;
  bool adaptive_momentum = false;
  int64_t lr_correction_steps = 0;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v("clip", clip, "clip each stage's gradient to this 2-norm before its step, as AsyncPP does (0: no clip)",
      non_negative);
    v("adaptive_momentum", adaptive_momentum,
      "stage r's beta1 = beta1 + w_r (0.99 - beta1) / D (AsyncPP's --adaptive_momentum; needs adam, adamw or nadam)");
    v("lr_correction_steps", lr_correction_steps,
      "K of the PipeMare-type LR correction, lr * w_r^-(1 - min(k/K, 1)) (AsyncPP's --lr_correction; 0: off)",
      non_negative);
  }
};

/// torch.nn.utils.clip_grad_norm_: scales every gradient by min(1, max / (norm + 1e-6)).
void clip_gradients(Stage& stage, double max_norm) {
  at::NoGradGuard no_grad;
  double sum = 0;
  for (const at::Tensor& p : stage.parameters()) {
    if (p.grad().defined()) sum += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  }
  const double coef = max_norm / (std::sqrt(sum) + 1e-6);
  if (coef >= 1) return;
  for (const at::Tensor& p : stage.parameters()) {
    if (p.grad().defined()) p.mutable_grad().mul_(coef);
  }
}

class NesterovAsyncPolicy : public StashingPolicy {
 public:
  NesterovAsyncPolicy(Stage& stage, const NesterovAsyncOptions& o)
      : StashingPolicy(stage, StashedWeights::Backward::ForwardVersion), o_(o),
        tau_(warmup(stage.index(), stage.count())) {
    if (o.clip > 0 && stage.loss_scaler()) {
      throw UserError("scheme nesterov_async: clip reads the gradients before fp16's loss scale is taken out. Fix: use "
                      "run.amp: bf16 or none, or clip: 0");
    }
    if (o.adaptive_momentum) {
      const std::optional<double> beta1 = stage.optimizer().beta1();
      if (!beta1) {
        throw UserError("scheme nesterov_async: adaptive_momentum sets each stage's beta1, and this optimizer has "
                        "none. Fix: use optimizer adam, adamw or nadam, or adaptive_momentum: false");
      }
      stage.optimizer().set_beta1(nesterov_async::adaptive_beta1(*beta1, stage.index(), stage.count()));
    }
  }

 protected:
  void step(Stage& stage) override {
    if (o_.clip > 0) clip_gradients(stage, o_.clip);
    const int64_t k = stage.optimizer().steps() + 1;
    stage.step(o_.lr_correction_steps > 0 ? pipemare::lr_factor(tau_, k, o_.lr_correction_steps) : 1.0);
  }

 private:
  NesterovAsyncOptions o_;
  int tau_;
};

class NesterovAsync : public OneFOneBScheme<NesterovAsyncOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<NesterovAsyncPolicy>(stage, options_);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, NesterovAsync, "nesterov_async",
                 "asynchronous 1F1B with weight stashing for NAdam, per-stage clipping (AsyncPP, ICML 2025)");

}  // namespace pipelab
