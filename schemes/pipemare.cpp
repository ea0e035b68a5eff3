/// `pipemare`: PipeMare (Yang, Zhang, Li, Ré, Aberger, De Sa, MLSys 2021): asynchronous 1F1B
/// with one weight copy and no stashing (the `async` execution: the forward of mini-batch j at
/// stage r reads weights w_r updates old, the backward the newest), plus two techniques, each
/// switchable:
///
/// - T1, learning-rate rescheduling (docs/schemes.md, "pipemare"; verified only as AsyncPP's
///   re-implementation, its `adjust_learning_rate`): the k-th step of a stage with delay
///   tau_r = w_r uses lr(k) * tau_r^-(1 - min(k/K, 1)). K has no verified default (AsyncPP: 7
///   epochs of steps), so `rescheduling_steps` must always be given.
/// - T2, discrepancy correction (docs/schemes.md, "pipemare"; its exact form is UNVERIFIED: no source
///   gives the equations and no implementation was found): a velocity delta, the exponential
///   average of the applied weight deltas with decay `velocity_decay` (no default: configuration),
///   and `correction: backward` lets the backward read W - tau_r * delta, an estimate of the
///   weights its forward used; `forward` (our reading of "applied forward in time") lets the
///   forward read W + tau_r * delta, an estimate of the weights its update will land on. Off by
///   default. Whether delta is reset at an epoch flush is UNVERIFIED too (`reset_velocity`).
///
/// The delay is tau_r = w_r = D - 1 - r, as AsyncPP uses it; the paper's tick-based formula is
/// UNVERIFIED. At D = 1 nothing is delayed and pipemare equals `single`.
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/weights.h"
#include "schemes/shared/pipemare.h"

namespace pipelab {
namespace {

enum class Correction { Off, Backward, Forward };

struct PipemareOptions {
  FlushOption flush;
  bool lr_rescheduling = true;
  int64_t rescheduling_steps = 0;
  Correction correction = Correction::Off;
  double velocity_decay = -1;
  bool reset_velocity = false;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v("lr_rescheduling", lr_rescheduling,
      "T1, learning-rate rescheduling: scale stage r's LR by tau_r^-(1 - min(k/K, 1))");
    v.required("rescheduling_steps", rescheduling_steps,
               "K, the steps over which T1 fades out (no verified default; AsyncPP uses 7 epochs' worth)", positive);
    v.choice("correction", correction,
             Choices<Correction>{{"off", Correction::Off}, {"backward", Correction::Backward},
                                 {"forward", Correction::Forward}},
             "T2 (UNVERIFIED form): backward reads W - tau_r delta, or forward reads W + tau_r delta, or off");
    v("velocity_decay", velocity_decay, "T2's decay of the weight-delta average, in [0, 1) (no default: set it)");
    v("reset_velocity", reset_velocity, "T2: zero the velocity at every epoch flush (UNVERIFIED)");
  }
  void check(const ConfigNode& node) const {
    if (correction != Correction::Off && !(velocity_decay >= 0 && velocity_decay < 1)) {
      node.fail("correction needs velocity_decay in [0, 1)", "set velocity_decay (its published value is unknown)");
    }
  }
};

class PipemarePolicy : public StagePolicy {
 public:
  PipemarePolicy(Stage& stage, const PipemareOptions& o)
      : o_(o), tau_(warmup(stage.index(), stage.count())), swap_(stage) {}

  void before_forward(Stage& stage, int mb, Message&) override {
    record_.forward(mb, stage.optimizer().steps());
    if (o_.correction == Correction::Forward) correct(stage, +1);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override {
    record_.backward(stage, mb, stage.optimizer().steps());
    if (o_.correction == Correction::Backward) correct(stage, -1);
  }
  void after_backward(Stage&, int) override { swap_.restore(); }
  void update(Stage& stage) override {
    const int64_t k = stage.optimizer().steps() + 1;
    const double factor = o_.lr_rescheduling ? pipemare::lr_factor(tau_, k, o_.rescheduling_steps) : 1.0;
    if (o_.correction == Correction::Off) {
      stage.step(factor);
    } else {
      const Weights before = copy_weights(stage);
      stage.step(factor);
      at::NoGradGuard no_grad;
      const Weights after = copy_weights(stage);
      if (velocity_.empty()) {
        for (const at::Tensor& w : after) velocity_.push_back(at::zeros_like(w));
      }
      for (size_t i = 0; i < after.size(); ++i) {
        velocity_[i].mul_(o_.velocity_decay).add_(after[i] - before[i], 1 - o_.velocity_decay);
      }
    }
    record_.add(stage, "lr_factor", factor);
    // One weight copy, plus the velocity delta when the correction keeps one.
    record_.add(stage, "stored_versions", velocity_.empty() ? 1.0 : 2.0);
  }
  void end(Stage&) override {
    if (o_.reset_velocity) {
      for (at::Tensor& v : velocity_) v.zero_();
    }
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  c10::IValue state() const override {
    if (velocity_.empty()) return {};
    return c10::IValue(c10::List<at::Tensor>(velocity_));
  }
  void load_state(Stage& stage, const c10::IValue& s) override {
    velocity_.clear();
    // A tensor list comes back from a .pt file as a generic list.
    if (!s.isList()) return;
    const std::vector<at::Tensor> params = stage.parameters();
    for (const c10::IValue& t : s.toListRef()) velocity_.push_back(t.toTensor().to(params.at(velocity_.size()).options()).clone());
  }

 private:
  /// Swaps in W + sign * tau * delta for one action (nothing before the first update).
  void correct(Stage& stage, double sign) {
    if (velocity_.empty() || tau_ == 0) return;
    at::NoGradGuard no_grad;
    Weights w = copy_weights(stage);
    for (size_t i = 0; i < w.size(); ++i) w[i].add_(velocity_[i], sign * tau_);
    swap_.swap_in(w);
  }

  PipemareOptions o_;
  int tau_;
  WeightSwap swap_;
  std::vector<at::Tensor> velocity_;
  StalenessRecorder record_;
};

/// T2's work on a stage's weights: from its first update on, each corrected action copies the
/// live weights (1), adds tau times the velocity (an axpy) and swaps the sum in (3); each
/// update copies the weights before and after it (2) and folds their difference into the
/// velocity (a difference, a scale in place, an axpy).
WeightWorks correction_work(const std::vector<Action>& actions, Correction correction, int tau) {
  WeightWorks work(actions.size());
  if (correction == Correction::Off) return work;
  const ActionKind corrected = correction == Correction::Forward ? ActionKind::Forward : ActionKind::Backward;
  bool updated = false;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      work[i].copies = 2 + kDifferenceCopies + 1 + kAxpyCopies;
      updated = true;
    } else if (a.kind == corrected && updated && tau > 0) {
      work[i].copies = 1 + kAxpyCopies + kSwapCopies;
    }
  }
  return work;
}

class Pipemare : public OneFOneBScheme<PipemareOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// Live weights, the velocity of its discrepancy correction, and the live copy set aside
  /// while corrected weights are swapped in.
  StageMemory stage_memory(int, int) const override { return {3, false}; }
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    return correction_work(stage_actions, options_.correction, warmup(stage, stages));
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<PipemarePolicy>(stage, options_);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Pipemare, "pipemare",
                 "asynchronous 1F1B, one weight copy, LR rescheduling and optional discrepancy correction (PipeMare)");

}  // namespace pipelab
