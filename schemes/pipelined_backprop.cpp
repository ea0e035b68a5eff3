/// `pipelined_backprop`: Pipelined Backpropagation (Kosson, Chiley, Venigalla, Hestness, Köster,
/// "Pipelined Backpropagation at Scale: Training Large Models without Batches",
/// arXiv:2003.11666; docs/schemes.md, "pipelined_backprop") — fine-grained asynchronous pipelining: one update
/// per mini-batch (the paper's batch of one sample: `run.batch_size: 1`), no flush inside an
/// epoch, stale gradients (docs/schemes.md, "pipelined_backprop"). Only the paper's abstract was readable and no code
/// was found, so every rule beyond vanilla asynchronous training is UNVERIFIED (docs/schemes.md, "Quirks") and an
/// explicit option with no silent default:
/// - `timing: tick` (docs/schemes.md, "pipelined_backprop"'s per-tick model: every stage runs one forward and one
/// backward per
///   tick, so stage r's forward of j reads W_(j-2(D-1-r)): 1F1B with 2 w_r warm-up forwards)
///   or `one_f_one_b` (docs/schemes.md, "1F1B"'s delays D-1-r);
/// - `spike_compensation: momentum_power` (docs/schemes.md, "pipelined_backprop"): with SGD momentum mu and a gradient
/// delayed
///   by D updates, W <- W - lr (mu^D v + (1 - mu^D)/(1 - mu) g): the D momentum terms the
///   delayed gradient missed land at once, its tail scaled by mu^D;
/// - `prediction: velocity` (docs/schemes.md, "pipelined_backprop": the forward of j runs on W - lr D v, D = its delay)
/// or
///   `weight_difference` (W + D (W - W_prev)); the backward reads the live weights (the
///   mixed-version backward, docs/schemes.md, "Notation and optimizers"), the update goes to the real ones.
/// Without them it is `async` with the tick's delays. Tested against its derived oracle (docs/schemes.md, "Numbered
/// oracles").
#include <cmath>

#include <algorithm>

#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/weights.h"

namespace pipelab {
namespace {

struct PipelinedBackpropOptions {
  enum class Timing { Tick, OneFOneB };
  enum class Spike { Off, MomentumPower };
  enum class Prediction { Off, Velocity, WeightDifference };
  FlushOption flush;
  Timing timing = Timing::Tick;
  Spike spike = Spike::Off;
  Prediction prediction = Prediction::Off;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v.choice("timing", timing, Choices<Timing>{{"tick", Timing::Tick}, {"one_f_one_b", Timing::OneFOneB}},
             "delays: tick (one forward and one backward per stage per tick, 2(D-1-r) updates) or one_f_one_b "
             "(D-1-r); UNVERIFIED as the paper's");
    v.choice("spike_compensation", spike, Choices<Spike>{{"off", Spike::Off}, {"momentum_power", Spike::MomentumPower}},
             "UNVERIFIED (docs/schemes.md, \"pipelined_backprop\"): momentum_power applies "
             "W -= lr (mu^D v + (1-mu^D)/(1-mu) g) for a gradient delayed D updates (SGD with momentum)");
    v.choice("prediction", prediction,
             Choices<Prediction>{{"off", Prediction::Off}, {"velocity", Prediction::Velocity},
                                 {"weight_difference", Prediction::WeightDifference}},
             "UNVERIFIED (docs/schemes.md, \"pipelined_backprop\"): the forward runs on W - lr D v "
             "(velocity) or W + D (W - W_prev) (weight_difference), D its delay");
  }
};

/// 1F1B with `2 w_r` (tick) or `w_r` warm-up forwards on stage r, one U after every backward.
Schedule pipelined(int stages, int units, bool tick) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    const int warmup = std::min((tick ? 2 : 1) * (stages - 1 - r), units);
    auto& a = s.device(r);
    for (int j = 0; j < warmup; ++j) a.push_back(Action::F(r, j));
    for (int i = 0; i < units; ++i) {
      if (i + warmup < units) a.push_back(Action::F(r, i + warmup));
      a.push_back(Action::B(r, i));
      a.push_back(Action::U(r));
    }
  }
  return s;
}

class PipelinedBackpropPolicy : public StagePolicy {
 public:
  PipelinedBackpropPolicy(Stage& stage, const PipelinedBackpropOptions& o, int delay)
      : o_(o), delay_(delay), swap_(stage) {}
  void begin(Stage&, int) override { updates_ = 0; }
  void before_forward(Stage& stage, int mb, Message&) override {
    record_.forward(mb, stage.optimizer().steps());
    // D: the updates this forward's gradient will be late by, min(j, tau_r) (the schedule
    // drains at every flush, so the warm-up's are shorter).
    const double late = static_cast<double>(std::min(mb, delay_));
    if (o_.prediction == PipelinedBackpropOptions::Prediction::Off || late <= 0) return;
    if (o_.prediction == PipelinedBackpropOptions::Prediction::Velocity) {
      swap_.swap_in(predict_weights(stage, stage.scheduled_lr(), late, {}));
      return;
    }
    if (previous_.empty()) return;  // no update yet: W - W_prev is 0
    Weights w = copy_weights(stage);
    for (size_t i = 0; i < w.size(); ++i) w[i] = w[i] + (w[i] - previous_[i]) * late;
    swap_.swap_in(w);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stage.optimizer().steps()); }
  void update(Stage& stage) override {
    if (o_.prediction == PipelinedBackpropOptions::Prediction::WeightDifference) previous_ = copy_weights(stage);
    const int j = updates_++;
    stage.step();
    if (o_.spike == PipelinedBackpropOptions::Spike::Off) return;
    // Spike compensation (docs/schemes.md, "pipelined_backprop") on top of SGD's own W -= lr v: the rest,
    // lr ((a - 1) v + b G).
    const double mu = stage.optimizer().sgd_settings()->momentum;
    const int d = std::min(j, delay_);
    const double a = std::pow(mu, d), b = mu == 1 ? d : (1 - a) / (1 - mu);
    const double lr = stage.optimizer().lr();
    at::NoGradGuard no_grad;
    const std::vector<at::Tensor> params = stage.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor v = stage.optimizer().direction(i);
      if (!v.defined()) continue;
      params[i].data().sub_((v * (a - 1) + stage.optimizer().last_coupled_gradient(i) * b) * lr);
    }
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  PipelinedBackpropOptions o_;
  int delay_;
  int updates_ = 0;  ///< in this schedule run: the next update's j
  WeightSwap swap_;
  Weights previous_;
  StalenessRecorder record_;
};

/// Its work on a stage's weights, `delay` its updates of delay: at each forward whose
/// gradient will be late (min(j, delay) > 0), `velocity` predicts and swaps the prediction in,
/// `weight_difference` (from the first update on) copies the weights, builds W + D (W - W_prev)
/// (a difference, a scale, a sum) and swaps it in, and copies the weights before each update;
/// spike compensation adds the rest of its step at each update ((a - 1) v and b G scaled,
/// summed, scaled by the LR and subtracted).
WeightWorks pipelined_work(const std::vector<Action>& actions, const PipelinedBackpropOptions& o, int delay) {
  using Prediction = PipelinedBackpropOptions::Prediction;
  WeightWorks work(actions.size());
  int updates = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      if (o.prediction == Prediction::WeightDifference) work[i].copies += 1;
      if (o.spike != PipelinedBackpropOptions::Spike::Off) work[i].copies += 1 + 1 + kDifferenceCopies + 1 + kAxpyCopies;
      ++updates;
    } else if (a.kind == ActionKind::Forward && std::min(a.mb, delay) > 0) {
      if (o.prediction == Prediction::Velocity) work[i] = predicted_swap(updates);
      if (o.prediction == Prediction::WeightDifference && updates > 0) {
        work[i].copies = 1 + kDifferenceCopies + 1 + kDifferenceCopies + kSwapCopies;
      }
    }
  }
  return work;
}

class PipelinedBackprop : public OneFOneBScheme<PipelinedBackpropOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// Updates per example without batches, by UNVERIFIED delays (the paper's code was not
  /// read): another training regime, not a faster way to train the same batch.
  Numerics numerics() const override { return Numerics::Other; }
  Schedule schedule(int stages, int units) const override { return pipelined(stages, units, tick()); }
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    return pipelined_work(stage_actions, options_, delay(stage, stages));
  }
  std::vector<int> max_in_flight(int stages) const override {
    std::vector<int> bound;
    for (int r = 0; r < stages; ++r) bound.push_back((tick() ? 2 : 1) * (stages - 1 - r) + 1);
    return bound;
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    if (options_.spike != PipelinedBackpropOptions::Spike::Off) {
      const auto sgd = stage.optimizer().sgd_settings();
      if (!sgd || sgd->dampening != 0 || sgd->nesterov) {
        fail("spike_compensation", "spike compensation is written for SGD with momentum, no dampening",
             "use optimizer: {type: sgd, momentum: 0.9}, or spike_compensation: off");
      }
    }
    return std::make_unique<PipelinedBackpropPolicy>(stage, options_, delay(stage.index(), stage.count()));
  }

 private:
  /// Updates stage r of D's gradients are late by: 2 w_r (tick) or w_r.
  int delay(int r, int stages) const { return (tick() ? 2 : 1) * (stages - 1 - r); }
  bool tick() const { return options_.timing == PipelinedBackpropOptions::Timing::Tick; }
};

}  // namespace

PIPELAB_REGISTER(Scheme, PipelinedBackprop, "pipelined_backprop",
                 "Pipelined Backpropagation: asynchronous, one update per mini-batch, no flush; spike compensation "
                 "and linear weight prediction as UNVERIFIED options");

}  // namespace pipelab
