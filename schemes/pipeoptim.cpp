/// `pipeoptim`: 1F1B whose forward runs on weights predicted from the optimizer's own
/// update direction; the backward runs on the current real weights, with no stash
/// (PipeOptim; docs/schemes.md, "pipeoptim", the reference code's quirks in docs/schemes.md, "Quirks").
///
///   W_hat = W_t - lr * s * d
///   paper:     s = D - r - 1 (the version the backward's update produces), d = the update
///              direction: the momentum buffer m_t for SGD, m_hat/(sqrt(u_hat) + eps) with the
///              optimizer's eps for Adam/AdamW (docs/schemes.md, "pipeoptim"'s paper column);
///   reference: s = D - r (one step past it, and a prediction even on the last stage),
///              d = mu v + (1 - tau) G with G including lambda W for SGD, and eps fixed at
///              1e-8 for Adam/AdamW (docs/schemes.md, "pipeoptim"'s reference column); the warm-up forwards use the
///              previous epoch's LR (docs/schemes.md, "Quirks").
///   predict_decay (AdamW, neither variant's): d + lambda W, so the decoupled decay the next
///              updates will apply is predicted too.
/// The predictor follows the optimizer actually used (the reference driver always used Adam's, docs/schemes.md,
/// "Quirks").
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/prediction_meter.h"

namespace pipelab {
namespace {

struct PipeoptimOptions {
  FlushOption flush;
  Variant variant = Variant::Paper;
  bool predict_decay = false;
  bool measure_prediction = true;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v.choice("variant", variant, variant_choices(), "paper: s = D-r-1 and the optimizer's direction; reference: the released code");
    v("predict_decay", predict_decay, "AdamW: also predict the decoupled weight decay (not in either variant)");
    v("measure_prediction", measure_prediction, "record ||W_hat - W_target|| / ||W_target - W_now|| (two weight copies)");
  }
};

/// Updates ahead stage r of D predicts: D - r - 1 (paper) or D - r (reference).
int steps_ahead(Variant variant, int r, int stages) {
  return variant == Variant::Paper ? warmup(r, stages) : stages - r;
}

class PipeoptimPolicy : public StagePolicy {
 public:
  PipeoptimPolicy(Stage& stage, const PipeoptimOptions& o)
      : o_(o), swap_(stage), s_(steps_ahead(o.variant, stage.index(), stage.count())) {
    if (o.variant == Variant::Reference) request_ = {DirectionRequest::Kind::OneStepAhead, true, 1e-8};
  }
  void before_forward(Stage& stage, int mb, Message&) override {
    const int64_t live = stage.optimizer().steps();
    record_.forward(mb, live + s_);
    if (s_ == 0) return;
    const double lr = o_.variant == Variant::Reference ? stage.optimizer().lr() : stage.scheduled_lr();
    const double decay = o_.predict_decay ? stage.optimizer().decoupled_decay() : 0.0;
    const Weights predicted = predict_weights(stage, lr, s_, request_, decay);
    if (o_.measure_prediction) meter_.start(stage, predicted, live + s_);
    swap_.swap_in(predicted);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stage.optimizer().steps()); }
  void update(Stage& stage) override {
    stage.step();
    if (const auto error = meter_.check(stage)) record_.add(stage, "prediction_error", *error);
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  PipeoptimOptions o_;
  WeightSwap swap_;
  int s_;
  DirectionRequest request_;
  PredictionMeter meter_;
  StalenessRecorder record_;
};

class Pipeoptim : public OneFOneBScheme<PipeoptimOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// The live weights wait aside while a prediction is swapped in.
  StageMemory stage_memory(int, int) const override { return {2, false}; }
  /// A prediction swapped in at each forward.
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    Predicting p;
    p.forward_steps = steps_ahead(options_.variant, stage, stages);
    p.measured = options_.measure_prediction;
    return predicted_swaps(stage_actions, p);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<PipeoptimPolicy>(stage, options_);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Pipeoptim, "pipeoptim", "1F1B with forward weights predicted from the optimizer (PipeOptim)");

}  // namespace pipelab
