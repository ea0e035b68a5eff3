/// `nesterov_async`: the Nesterov method for asynchronous pipeline parallelism (Ajanthan,
/// Ramasinghe, Zuo, Avraham, Long, ICML 2025) as its released code (PluralisResearch/AsyncPP)
/// trains (docs/schemes.md, "nesterov_async", verified): asynchronous 1F1B with PipeDream weight stashing,
/// stage r holding D - r versions, its forward and its (recomputed) backward reading the version
/// W_{j - w_r}, the ring reset to the current weights at every epoch flush; the optimizer is
/// torch.optim.NAdam with decoupled weight decay (here `optimizer: {type: nadam,
/// decoupled_weight_decay: true}`: the code's NAdam is Nesterov's look-ahead plus Adam
/// preconditioning, torch's NAdam of docs/schemes.md, "nesterov_async"), the gradient clipped to norm 10 per stage
/// before each step (AsyncPP's per-stage clip, docs/schemes.md, "Quirks").
///
/// Options, each as the code has it (off in its published runs):
/// - `adaptive_momentum` (docs/schemes.md, "nesterov_async"): stage r's beta1 = beta1 + w_r (0.99 - beta1) / D;
/// - `lr_correction_steps` K ("PipeMare type LR correction": PipeMare's LR rescheduling, docs/schemes.md, "pipemare"):
///   stage r's k-th step uses lr(k) * w_r^-(1 - min(k/K, 1)), with the LR set by the global step
///   (pipelab's default where AsyncPP's drain reuses the last LR, docs/schemes.md, "Quirks").
/// With the recompute of the code, a backward reads exactly its forward's weights, which is
/// what stashing with saved activations computes too.
///
/// `variant: paper` is the paper's delayed Nesterov update (its Eq. 10, docs/schemes.md, "nesterov_async"; read
/// second-hand, not from the PDF, so every coefficient is configuration): with d_t = gamma (w_t - w_{t-1}),
///   w_{t+1} = w_t + d_t - lr (1 - gamma) grad f(w_{t-tau} + d_{t-tau}).
/// Here the forward of a mini-batch computes the look-ahead w + gamma (w - w_prev) from the
/// live weights it would read (w_{t-tau}: the stage's delay tau is the 1F1B schedule's w_r, as
/// in the code; the paper's floor((2(P-i)+1)/2K) is UNVERIFIED) and stashes it for the
/// backward; the update is a plain SGD step scaled by 1 - gamma, then the momentum term
/// gamma (w_t - w_{t-1}) with w_{t-1} the weights before the previous update (d = 0 before
/// the first, the oracle's clamp). `gamma` has no default (the paper's practice of 0.99 is
/// second-hand); the theory schedule gamma_t = (t-2)/t and the no-stash variant (Eq. 13) are
/// not implemented. Needs `optimizer: sgd` without momentum (gamma is the momentum); a coupled
/// weight decay adds lambda w_t to the gradient. Memory: the stash plus one weight copy.
#include <ATen/ATen.h>

#include <cmath>
#include <map>

#include "core/weights/stashing_policy.h"
#include "schemes/nesterov_async.h"
#include "schemes/shared/pipemare.h"

namespace pipelab {
namespace {

struct NesterovAsyncOptions {
  FlushOption flush;
  Variant variant = Variant::Reference;
  std::optional<double> gamma;
  std::optional<double> clip;
  bool adaptive_momentum = false;
  int64_t lr_correction_steps = 0;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v.choice("variant", variant, variant_choices(),
             "reference: the released code (stashing + the configured optimizer, nadam in its runs); paper: the "
             "paper's delayed Nesterov update (known second-hand), needs gamma and optimizer sgd without momentum");
    v("gamma", gamma,
      "variant paper: the momentum gamma of the delayed Nesterov update (required: 0.99 in the paper's practice, "
      "second-hand)", in_half_open(0.0, 1.0));
    v("clip", clip,
      "clip each stage's gradient to this 2-norm before its step, as AsyncPP does (0: no clip; default 10 for "
      "variant reference, 0 for paper)",
      non_negative);
    v("adaptive_momentum", adaptive_momentum,
      "stage r's beta1 = beta1 + w_r (0.99 - beta1) / D (AsyncPP's --adaptive_momentum; needs adam, adamw or nadam)");
    v("lr_correction_steps", lr_correction_steps,
      "K of the PipeMare-type LR correction, lr * w_r^-(1 - min(k/K, 1)) (AsyncPP's --lr_correction; 0: off)",
      non_negative);
  }
  double clip_norm() const { return clip.value_or(variant == Variant::Reference ? 10.0 : 0.0); }
  void check(const ConfigNode& node) const {
    if (variant == Variant::Paper && !gamma) {
      node.fail("variant paper needs the momentum of its update, which has no published default here",
                "add gamma: 0.99 (the paper's practice, second-hand) or another value");
    }
    if (variant == Variant::Reference && gamma) {
      node.child("gamma").fail("gamma belongs to variant paper; the released code's momentum is the optimizer's",
                               "remove gamma, or set variant: paper");
    }
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

/// What both variants do around an optimizer step: the per-stage clip (docs/schemes.md, "Quirks") and
/// the optional PipeMare-type LR correction (docs/schemes.md, "pipemare"), set by the global step (pipelab's default
/// where AsyncPP's drain reuses the last LR, docs/schemes.md, "Quirks").
class StepRules {
 public:
  StepRules(Stage& stage, const NesterovAsyncOptions& o)
      : clip_(o.clip_norm()), tau_(warmup(stage.index(), stage.count())), k_(o.lr_correction_steps) {
    if (clip_ > 0 && stage.loss_scaler()) {
      throw UserError("scheme nesterov_async: clip reads the gradients before fp16's loss scale is taken out. Fix: use "
                      "run.amp: bf16 or none, or clip: 0");
    }
  }
  /// One step of `stage`'s optimizer with its LR scaled by `scale` (and the correction).
  void step(Stage& stage, double scale = 1.0) const {
    if (clip_ > 0) clip_gradients(stage, clip_);
    const int64_t k = stage.optimizer().steps() + 1;
    stage.step(scale * (k_ > 0 ? pipemare::lr_factor(tau_, k, k_) : 1.0));
  }

 private:
  double clip_;
  int tau_;
  int64_t k_;
};

/// What NesterovAsync::optimizer_refused says: the released code's adaptive momentum sets an
/// Adam beta1; the paper's update carries its own momentum over plain SGD.
std::string nesterov_refuses(const NesterovAsyncOptions& o, const Optimizer& optimizer) {
  if (o.variant == Variant::Paper) {
    const auto sgd = optimizer.sgd_settings();
    if (sgd && sgd->momentum == 0) return "";
    return "scheme nesterov_async, variant paper: its update carries its own momentum gamma, so the optimizer must "
           "be plain SGD. Fix: use optimizer {type: sgd, momentum: 0}";
  }
  if (!o.adaptive_momentum || optimizer.beta1()) return "";
  return "scheme nesterov_async: adaptive_momentum sets each stage's beta1, and this optimizer has none. Fix: use "
         "optimizer adam, adamw or nadam, or adaptive_momentum: false";
}

/// variant reference: the released code (docs/schemes.md, "nesterov_async").
class NesterovAsyncPolicy : public StashingPolicy {
 public:
  NesterovAsyncPolicy(Stage& stage, const NesterovAsyncOptions& o)
      : StashingPolicy(stage, StashedWeights::Backward::ForwardVersion), rules_(stage, o) {
    const std::string refused = nesterov_refuses(o, stage.optimizer());
    if (!refused.empty()) throw UserError(refused);
    if (o.adaptive_momentum) {
      const double beta1 = *stage.optimizer().beta1();
      stage.optimizer().set_beta1(nesterov_async::adaptive_beta1(beta1, stage.index(), stage.count()));
    }
  }

 protected:
  void step(Stage& stage) override { rules_.step(stage); }

 private:
  StepRules rules_;
};

/// variant paper: the delayed Nesterov update (docs/schemes.md, "nesterov_async") with the look-ahead of the
/// forward's live weights stashed for its backward.
class NesterovPaperPolicy : public StagePolicy {
 public:
  NesterovPaperPolicy(Stage& stage, const NesterovAsyncOptions& o)
      : gamma_(*o.gamma), rules_(stage, o), swap_(stage) {
    const std::string refused = nesterov_refuses(o, stage.optimizer());
    if (!refused.empty()) throw UserError(refused);
    if (o.adaptive_momentum) {
      throw UserError("scheme nesterov_async, variant paper: adaptive_momentum sets an Adam beta1, which this "
                      "variant has none of. Fix: adaptive_momentum: false");
    }
  }

  void before_forward(Stage& stage, int mb, Message&) override {
    forward_version_[mb] = stage.optimizer().steps();
    record_.forward(mb, forward_version_[mb]);
    Weights ahead = copy_weights(stage);
    at::NoGradGuard no_grad;
    // d = gamma (w - w_prev); zero before the first update (the oracle's clamp).
    for (size_t i = 0; i < ahead.size() && !prev_.empty(); ++i) ahead[i].add_(ahead[i] - prev_[i], gamma_);
    swap_.swap_in(ahead);
    stash_[mb] = std::move(ahead);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override {
    record_.backward(stage, mb, forward_version_.at(mb));
    swap_.swap_in(stash_.at(mb));
  }
  void after_backward(Stage&, int mb) override {
    swap_.restore();
    stash_.erase(mb);
    forward_version_.erase(mb);
  }
  void update(Stage& stage) override {
    Weights before = copy_weights(stage);
    rules_.step(stage, 1 - gamma_);  // w - lr (1 - gamma) g
    if (!prev_.empty()) {
      at::NoGradGuard no_grad;
      const std::vector<at::Tensor> params = stage.parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].data().add_(before[i] - prev_[i], gamma_);
    }
    prev_ = std::move(before);
    record_.add(stage, "stored_versions", static_cast<double>(stash_.size() + 1));
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  /// w_{t-1} is optimizer state: a resumed run must continue its momentum.
  c10::IValue state() const override {
    c10::impl::GenericList list(c10::TensorType::get());
    for (const at::Tensor& t : prev_) list.push_back(t.to(at::kCPU));
    return list;
  }
  void load_state(Stage& stage, const c10::IValue& s) override {
    prev_.clear();
    if (s.isNone()) return;
    const std::vector<at::Tensor> params = stage.parameters();
    for (const c10::IValue& t : s.toListRef()) prev_.push_back(t.toTensor().to(params.at(prev_.size()).options()));
  }

 private:
  double gamma_;
  StepRules rules_;
  WeightSwap swap_;
  Weights prev_;  ///< the weights before the latest update (empty before the first)
  std::map<int, Weights> stash_;
  std::map<int, int64_t> forward_version_;
  StalenessRecorder record_;
};

/// The paper variant's work on a stage's weights: each forward copies the live weights (1),
/// adds gamma (w - w_prev) once the stage has updated (a difference and an axpy), swaps the
/// look-ahead in (3) and keeps it for its backward, which swaps it in again (3); each update
/// copies the weights before it (1) and, after the first, adds gamma (before - w_prev).
WeightWorks look_ahead_work(const std::vector<Action>& actions) {
  WeightWorks work(actions.size());
  int updates = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    const double momentum = updates > 0 ? kDifferenceCopies + kAxpyCopies : 0.0;
    if (a.kind == ActionKind::Update) {
      work[i].copies = 1 + momentum;
      ++updates;
    } else if (a.kind == ActionKind::Forward) {
      work[i].copies = 1 + momentum + kSwapCopies;
    } else if (a.kind == ActionKind::Backward) {
      work[i].copies = kSwapCopies;
    }
  }
  return work;
}

class NesterovAsync : public OneFOneBScheme<NesterovAsyncOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// Released: PipeDream's stash (D - r sets). Paper: a look-ahead per mini-batch in flight,
  /// the previous weights and the live ones.
  StageMemory stage_memory(int stage, int stages) const override {
    return {static_cast<double>(stages - stage + (options_.variant == Variant::Paper ? 2 : 0)), false};
  }
  /// Released: PipeDream's stash and swaps. Paper: the look-ahead's copies.
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int, int) const override {
    return options_.variant == Variant::Paper ? look_ahead_work(stage_actions) : stash_copies(stage_actions);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    if (options_.variant == Variant::Paper) return std::make_unique<NesterovPaperPolicy>(stage, options_);
    return std::make_unique<NesterovAsyncPolicy>(stage, options_);
  }
  std::string optimizer_refused(const Optimizer& optimizer, int, int) const override {
    return nesterov_refuses(options_, optimizer);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, NesterovAsync, "nesterov_async",
                 "asynchronous 1F1B with weight stashing for NAdam, per-stage clipping (AsyncPP, ICML 2025)");

}  // namespace pipelab
