/// `spectrain`: SpecTrain's weight prediction (Chen et al. 2018; docs/schemes.md, "spectrain version 1",
/// docs/schemes.md, "spectrain version 2", the reference code's quirks in docs/schemes.md, "Quirks"). Stage r of D, w_r
/// = D - 1 - r warm-up forwards.
///
/// version 1 — forward and backward on predicted weights, the update on the real ones:
///   forward  W_f = W_t  - lr_f * s_f * d_f,  s_f = floor(r/2) + w_r   (docs/schemes.md, "spectrain version 1")
///   backward W_b = W_t' - lr   * s_b * d_b,  s_b = floor(r/2)         (docs/schemes.md, "spectrain version 1")
///   paper:     d_f = d_b = v (the momentum buffer), lr = the LR of the next update;
///   reference: d_f = mu v + G with G including lambda W (torch <= 1.4), d_b = mu v (the
///              gradient was zeroed in place), and the forward's lr lags by an epoch for the
///              warm-up forwards (SpecTrain's LR schedule, docs/schemes.md, "1F1B"; docs/schemes.md, "Quirks"). The
///              published STv1 columns come from the reference.
/// version 2 —
///   paper (README; docs/schemes.md, "spectrain version 2"): the forward stashes W_hat = W_t - lr * w_r * v and the
///   backward
///              reuses it; the real weights take the update;
///   reference (released code, docs/schemes.md, "spectrain version 2"): PipeDream's stashing ring (not reset at
///   flushes, docs/schemes.md, "Quirks")
///              and an SGD update scaled by D - r on the stashed trajectory. The published
///              STv2 columns come from this.
/// There is no prediction before the first gradient (docs/schemes.md, "Quirks").
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/prediction_meter.h"
#include "core/weights/stashed_weights.h"

namespace pipelab {
namespace {

struct SpectrainOptions {
  FlushOption flush;
  int version = 1;
  Variant variant = Variant::Paper;
  bool measure_prediction = true;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v("version", version, "1: predict forward and backward; 2: one prediction reused by both", in_range(1, 2));
    v.choice("variant", variant, variant_choices(), "paper formulas or the released code's (see docs/schemes.md)");
    v("measure_prediction", measure_prediction, "record ||W_hat - W_target|| / ||W_target - W_now|| (two weight copies)");
  }
};

/// Version 1's steps ahead at stage r of D: s_f = floor(r/2) + w_r, s_b = floor(r/2).
int forward_steps(int r, int stages) { return r / 2 + warmup(r, stages); }
int backward_steps(int r) { return r / 2; }

/// Version 1, both variants.
class SpectrainV1 : public StagePolicy {
 public:
  SpectrainV1(Stage& stage, const SpectrainOptions& o)
      : o_(o), swap_(stage), s_f_(forward_steps(stage.index(), stage.count())), s_b_(backward_steps(stage.index())) {
    if (o.variant == Variant::Reference) {
      forward_request_ = {DirectionRequest::Kind::OneStepAhead, true, std::nullopt};
      backward_request_ = {DirectionRequest::Kind::MomentumOnly, true, std::nullopt};
    }
  }
  void before_forward(Stage& stage, int mb, Message&) override {
    const int64_t live = stage.optimizer().steps();
    record_.forward(mb, live + s_f_);
    if (s_f_ == 0) return;
    // The released code reads the LR stored at forward time: the previous epoch's for the warm-up
    // forwards (docs/schemes.md, "Quirks"). The paper uses the LR of the update the prediction
    // anticipates.
    const double lr = o_.variant == Variant::Reference ? stage.optimizer().lr() : stage.scheduled_lr();
    const Weights predicted = predict_weights(stage, lr, s_f_, forward_request_);
    if (o_.measure_prediction) meter_.start(stage, predicted, live + s_f_);
    swap_.swap_in(predicted);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override {
    record_.backward(stage, mb, stage.optimizer().steps() + s_b_);
    if (s_b_ > 0) swap_.swap_in(predict_weights(stage, stage.scheduled_lr(), s_b_, backward_request_));
  }
  void after_backward(Stage&, int) override { swap_.restore(); }
  void update(Stage& stage) override {
    stage.step();
    if (const auto error = meter_.check(stage)) record_.add(stage, "prediction_error", *error);
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  SpectrainOptions o_;
  WeightSwap swap_;
  int s_f_, s_b_;
  DirectionRequest forward_request_, backward_request_;
  PredictionMeter meter_;
  StalenessRecorder record_;
};

/// Version 2 as in the README (docs/schemes.md, "spectrain version 2"): one predicted version per mini-batch, stashed.
class SpectrainV2Paper : public StagePolicy {
 public:
  SpectrainV2Paper(Stage& stage, const SpectrainOptions& o)
      : o_(o), swap_(stage), s_(warmup(stage.index(), stage.count())) {}
  void before_forward(Stage& stage, int mb, Message&) override {
    const int64_t live = stage.optimizer().steps();
    record_.forward(mb, live + s_);
    target_[mb] = live + s_;
    if (s_ == 0) return;
    Weights predicted = predict_weights(stage, stage.scheduled_lr(), s_, {});
    if (o_.measure_prediction) meter_.start(stage, predicted, live + s_);
    swap_.swap_in(predicted);
    stash_[mb] = std::move(predicted);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override {
    record_.backward(stage, mb, target_.at(mb));
    auto it = stash_.find(mb);
    if (it != stash_.end()) swap_.swap_in(it->second);
  }
  void after_backward(Stage&, int mb) override {
    swap_.restore();
    stash_.erase(mb);
    target_.erase(mb);
  }
  void update(Stage& stage) override {
    stage.step();
    if (const auto error = meter_.check(stage)) record_.add(stage, "prediction_error", *error);
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  SpectrainOptions o_;
  WeightSwap swap_;
  int s_;
  std::map<int, Weights> stash_;
  std::map<int, int64_t> target_;
  PredictionMeter meter_;
  StalenessRecorder record_;
};

/// Version 2 as released (docs/schemes.md, "spectrain version 2"): PipeDream's ring plus an update scaled by D - r.
class SpectrainV2Reference : public StagePolicy {
 public:
  explicit SpectrainV2Reference(Stage& stage)
      : stash_(stage, warmup(stage.index(), stage.count()), StashedWeights::Backward::Ring),
        scale_(stage.count() - stage.index()) {}
  void before_forward(Stage&, int mb, Message&) override { record_.forward(mb, stash_.before_forward(mb)); }
  void after_forward(Stage&, int, Message&) override { stash_.after_forward(); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stash_.before_backward(mb)); }
  void after_backward(Stage&, int mb) override { stash_.after_backward(mb); }
  void update(Stage& stage) override {
    stage.step(scale_);
    stash_.after_update();
  }
  void end(Stage&) override { stash_.flush(); }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  c10::IValue state() const override { return stash_.state(); }
  void load_state(Stage&, const c10::IValue& s) override { stash_.load_state(s); }

 private:
  StashedWeights stash_;
  double scale_;
  StalenessRecorder record_;
};

class Spectrain : public OneFOneBScheme<SpectrainOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// Version 1: the live weights wait aside while a prediction is swapped in. Version 2
  /// keeps one set per mini-batch in flight (D - r) besides (paper: predictions; reference:
  /// the stash).
  StageMemory stage_memory(int stage, int stages) const override {
    if (options_.version == 1) return {2, false};
    return {static_cast<double>(stages - stage + (options_.variant == Variant::Paper ? 1 : 0)), false};
  }
  /// Version 1 predicts (and swaps in) at each forward and each backward ahead of it; the
  /// paper's version 2 at each forward, kept for the backward; the released version 2 is
  /// PipeDream's stash.
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    Predicting p;
    p.measured = options_.measure_prediction;
    if (options_.version == 1) {
      p.forward_steps = forward_steps(stage, stages);
      p.backward_steps = backward_steps(stage);
    } else if (options_.variant == Variant::Paper) {
      p.forward_steps = warmup(stage, stages);
      p.stash_for_backward = true;
    } else {
      return stash_copies(stage_actions);
    }
    return predicted_swaps(stage_actions, p);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    if (options_.version == 1) return std::make_unique<SpectrainV1>(stage, options_);
    if (options_.variant == Variant::Paper) return std::make_unique<SpectrainV2Paper>(stage, options_);
    return std::make_unique<SpectrainV2Reference>(stage);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Spectrain, "spectrain", "1F1B with weight prediction, version 1 or 2 (SpecTrain)");

}  // namespace pipelab
