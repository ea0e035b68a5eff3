/// `xpipe`: XPipe (Guan, Yin, Li, Lu, "XPipe: Efficient Pipeline Model Parallelism for
/// Multi-GPU DNN Training", arXiv:1911.04610, a preprint). Micro-batches flow asynchronously
/// across mini-batch boundaries; each pass runs on weights predicted from Adam's moments, so
/// nothing is stashed. The version difference and the predictor are those of docs/schemes.md
/// docs/schemes.md, "xpipe", their oracles in docs/schemes.md, "Numbered oracles"; no XPipe code was found, so nothing
/// here is verified against code, and the mechanism itself is second-hand (a third-party reading note).
///
/// Units. A run unit (one `run.batch_size` batch) is a micro-batch; `micro_batches` (T)
/// consecutive units make one mini-batch, i.e. one update, as in `pipedream_2bw`. The last
/// mini-batch of a schedule run may be shorter; its gradient is the mean over what it has.
/// Each update takes the LR of its mini-batch's first micro-batch (the runner's LR schedule
/// counts micro-batches). T = 4 by default is pipelab's choice (the paper's T is UNVERIFIED).
///
/// Semantics (stage r of D):
/// - schedule: 1F1B with the full warm-up w_r = D-1-r (not 2BW's clamp to T: with one weight
///   copy nothing bounds the versions in flight), one update (U) after the backward of each
///   mini-batch's last micro-batch. At T = 1 it is the 1F1B schedule of `spectrain`.
/// - version difference (docs/schemes.md, "xpipe", second-hand; r/2 and the rounding UNVERIFIED, see xpipe.h):
///   s_fwd = round((D + T - r/2 - 2)/T), s_bwd = round((T + floor(r/2) - 1)/T); defaults
///   ceil(r/2) and round-half-up (`half_stage`, `rounding` choose the other readings).
/// - predictor (docs/schemes.md, "xpipe", second-hand): W_hat = W - lr * s * m_hat/(sqrt(u_hat) + eps), Adam's
///   bias-corrected direction with the optimizer's eps (predict_weights' Adam direction), lr
///   the LR of the stage's next update. The source's note writes "+"; descent must subtract,
///   so the sign is UNVERIFIED but the only sensible one. As in SpecTrain v1, the forward
///   predicts s_fwd and the backward s_bwd updates ahead, each from the live real weights,
///   swapped in for the pass and swapped out after it: one real copy plus a live prediction.
///   The backward reads W_hat(s_bwd) in its own weight products (the mixed-version backward
///   of docs/schemes.md, "Notation and optimizers", as `spectrain` v1).
/// - update: the configured optimizer on the real weights, once per mini-batch, with the mean of
///   the micro-batches' gradients. The predictor is defined on Adam's moments, so an Adam-family
///   optimizer is required (adam, adamw; nadam predicts with NAdam's own step direction, docs/schemes.md,
///   "nesterov_async"'s, which is not XPipe's); `adam_only: false` lets any optimizer's direction stand in (SGD: its
///   momentum buffer), which is not XPipe. AdamW's decoupled decay is not predicted.
/// - bellwether (UNVERIFIED that the mini-batch's micro-batches reuse its prediction):
///   `per_micro_batch` (default) predicts at every F and B from the live weights. Within a
///   mini-batch the backwards see no update in between, so their predictions are the same
///   weights anyway; the forwards of a mini-batch straddle one of the stage's updates unless
///   T divides w_r, so the later ones predict from one update newer weights and target one
///   version further. `reuse` runs every forward of a mini-batch on the weights its first
///   micro-batch (the bellwether) ran on, kept as one extra copy until the next bellwether.
/// - flushes (UNVERIFIED; no source describes them): `flush: epoch` (default) drains at
///   every epoch end, mini-batches restart with the epoch, Adam's moments carry over;
///   `flush: never` runs one pipeline across epochs (mini-batches may straddle epochs).
///   Nothing is predicted before the stage's first update (docs/schemes.md, "Quirks": Adam has no moments yet).
/// - metrics: forward_gap and backward_gap (the live version at the backward minus the version
///   the weights stand for: live + s when predicted, live when not) and prediction_error.
/// At D = 1 and T = 1, s = 0 and xpipe is `single`; at T = 1 it is `spectrain` v1 (paper
/// variant) with the Adam direction, the version difference reducing to SpecTrain v1's s_f and
/// s_b (docs/schemes.md, "spectrain version 1"; both tested).
#include <ATen/ATen.h>

#include <optional>

#include "core/scheme/lr_at_unit.h"
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/util/error.h"
#include "core/weights/prediction_meter.h"
#include "core/weights/weights.h"
#include "schemes/xpipe.h"

namespace pipelab {
namespace {

using Flush = FlushOption::Flush;
using xpipe::HalfStage;
using xpipe::Rounding;
enum class Bellwether { PerMicroBatch, Reuse };

struct XpipeOptions {
  int micro_batches = 4;
  Flush flush = Flush::Epoch;
  HalfStage half_stage = HalfStage::Ceil;
  Rounding rounding = Rounding::HalfUp;
  Bellwether bellwether = Bellwether::PerMicroBatch;
  bool adam_only = true;
  bool measure_prediction = true;
  template <class V>
  void fields(V& v) {
    v("micro_batches", micro_batches,
      "T: micro-batches (run.batch_size batches) per mini-batch; their mean gradient makes one update "
      "(the paper's T is unknown; 4 is pipelab's choice)",
      positive);
    v.choice("flush", flush, Choices<Flush>{{"epoch", Flush::Epoch}, {"never", Flush::Never}},
             "epoch: drain at every epoch end, mini-batches restarting; never: one pipeline across epochs "
             "(XPipe's flushes are undescribed: UNVERIFIED). Either way nothing is predicted before a stage's first "
             "update");
    v.choice("half_stage", half_stage, Choices<HalfStage>{{"ceil", HalfStage::Ceil}, {"real", HalfStage::Real}},
             "the r/2 in XPipe's version difference s_fwd (UNVERIFIED): ceil(r/2), which gives SpecTrain v1's s at "
             "T = 1, or the real r/2");
    v.choice("rounding", rounding, Choices<Rounding>{{"half_up", Rounding::HalfUp}, {"half_even", Rounding::HalfEven}},
             "the version difference's round() on an exact .5 (UNVERIFIED): up, or to the even integer");
    v.choice("bellwether", bellwether,
             Choices<Bellwether>{{"per_micro_batch", Bellwether::PerMicroBatch}, {"reuse", Bellwether::Reuse}},
             "per_micro_batch: predict at every forward from the live weights; reuse: every forward of a mini-batch "
             "runs on its first micro-batch's weights (one more copy; UNVERIFIED)");
    v("adam_only", adam_only,
      "XPipe predicts with Adam's moments: require adam, adamw or nadam; false lets any optimizer's own update "
      "direction stand in (e.g. SGD's momentum buffer; not XPipe)");
    v("measure_prediction", measure_prediction,
      "record ||W_hat - W_target|| / ||W_target - W_now|| (two weight copies)");
  }
};

/// What Xpipe::optimizer_refused says: XPipe's prediction reads Adam's moments.
std::string xpipe_refuses(const XpipeOptions& o, const Optimizer& optimizer) {
  if (!o.adam_only || optimizer.beta1()) return "";
  return "scheme xpipe: XPipe predicts the weights with Adam's moments (W - lr s m_hat / (sqrt(u_hat) + eps)), and "
         "this optimizer has none. Fix: use optimizer adam or adamw (XPipe's), or set adam_only: false to predict "
         "with this optimizer's own update direction (not XPipe)";
}

class XpipePolicy : public StagePolicy {
 public:
  XpipePolicy(Stage& stage, const XpipeOptions& o)
      : o_(o), swap_(stage),
        s_(xpipe::version_difference(stage.index(), stage.count(), o.micro_batches, o.half_stage, o.rounding)) {
    const std::string refused = xpipe_refuses(o, stage.optimizer());
    if (!refused.empty()) throw UserError(refused);
  }

  void begin(Stage&, int units) override {
    units_in_run_ = units;
    updates_ = 0;
    accumulated_ = 0;
    bellwether_.reset();
  }

  void before_forward(Stage& stage, int mb, Message&) override {
    const int64_t mini_batch = mb / o_.micro_batches;
    if (o_.bellwether == Bellwether::Reuse && bellwether_ && bellwether_->mini_batch == mini_batch) {
      record_.forward(mb, bellwether_->version);
      swap_.swap_in(bellwether_->weights);
      return;
    }
    std::optional<Weights> predicted;
    const int64_t version = predict(stage, s_.forward, predicted);
    record_.forward(mb, version);
    if (predicted && o_.measure_prediction) meter_.start(stage, *predicted, version);
    if (o_.bellwether == Bellwether::Reuse) {
      bellwether_ = Kept{mini_batch, version, predicted ? *predicted : copy_weights(stage)};
    }
    if (predicted) swap_.swap_in(*predicted);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }

  void before_backward(Stage& stage, int mb) override {
    std::optional<Weights> predicted;
    record_.backward(stage, mb, predict(stage, s_.backward, predicted));
    if (predicted) swap_.swap_in(*predicted);
  }
  void after_backward(Stage&, int) override {
    swap_.restore();
    ++accumulated_;
  }

  void update(Stage& stage) override {
    average_gradients(stage, accumulated_);  // the mean over the mini-batch's micro-batches
    // The LR of the mini-batch's first micro-batch, not of the stage's update count.
    stage.step(lr_factor_at_unit(stage, next_update_unit(), "xpipe"));
    ++updates_;
    accumulated_ = 0;
    if (const auto error = meter_.check(stage)) record_.add(stage, "prediction_error", *error);
    // The real weights, plus the bellwether's prediction while a mini-batch reuses it.
    record_.add(stage, "stored_versions", bellwether_ ? 2.0 : 1.0);
  }

  void end(Stage&) override {
    units_before_ += units_in_run_;
    bellwether_.reset();
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  /// The runner steps (micro-batches) of the runs before, for the LR after a resume.
  c10::IValue state() const override { return c10::IValue(units_before_); }
  void load_state(Stage&, const c10::IValue& state) override { units_before_ = state.isInt() ? state.toInt() : 0; }

 private:
  struct Kept {
    int64_t mini_batch, version;
    Weights weights;
  };

  /// The runner step of the next update's first micro-batch.
  int64_t next_update_unit() const { return units_before_ + updates_ * o_.micro_batches; }

  /// The predicted W_hat (docs/schemes.md, "xpipe") for `s` updates ahead, into `out` (left empty when
  /// nothing is predicted: s = 0, or no update yet, docs/schemes.md, "Quirks"); returns the version the pass's weights
  /// stand for.
  int64_t predict(Stage& stage, int s, std::optional<Weights>& out) {
    const int64_t live = stage.optimizer().steps();
    if (s == 0 || live == 0) return live;
    out = predict_weights(stage, stage.lr_at(next_update_unit()), s, {});
    return live + s;
  }

  XpipeOptions o_;
  WeightSwap swap_;
  xpipe::VersionDifference s_;
  int64_t units_in_run_ = 0, units_before_ = 0;
  int64_t updates_ = 0;  ///< updates in this schedule run
  int accumulated_ = 0;  ///< micro-batches whose gradients wait for the next update
  std::optional<Kept> bellwether_;
  PredictionMeter meter_;
  StalenessRecorder record_;
};

/// `bellwether: reuse`: a mini-batch's first forward keeps its weights (the prediction, or a
/// copy of the live ones when none is made) and its later forwards swap them in (3). The
/// meter's copies stay where per-micro-batch prediction opens them (nearly where it does).
void reuse_bellwether(const std::vector<Action>& actions, int micro_batches, WeightWorks& work) {
  int kept = -1;  // the mini-batch whose weights are kept
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind != ActionKind::Forward) continue;
    const int mini_batch = a.mb / micro_batches;
    if (mini_batch == kept) {
      work[i] = {kSwapCopies, 0};
    } else {
      kept = mini_batch;
      if (work[i].predictions == 0) work[i] = {1, 0};
    }
  }
}

class Xpipe : public Configured<Scheme, XpipeOptions> {
 public:
  using Configured::Configured;
  /// The live weights wait aside while a prediction is swapped in; `bellwether: reuse` keeps
  /// one more copy.
  StageMemory stage_memory(int, int) const override {
    return {options_.bellwether == Bellwether::Reuse ? 3.0 : 2.0, false};
  }
  Span span() const override { return options_.flush == Flush::Epoch ? Span::Epoch : Span::Run; }
  /// A prediction swapped in at each forward and backward that predicts, from the stage's
  /// first update on (no moments before it).
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    const xpipe::VersionDifference s = xpipe::version_difference(stage, stages, options_.micro_batches,
                                                                 options_.half_stage, options_.rounding);
    Predicting p;
    p.forward_steps = s.forward;
    p.backward_steps = s.backward;
    p.from_first_update = true;
    p.measured = options_.measure_prediction;
    WeightWorks work = predicted_swaps(stage_actions, p);
    if (options_.bellwether == Bellwether::Reuse) reuse_bellwether(stage_actions, options_.micro_batches, work);
    return work;
  }
  /// Micro-batches overlap updates; forwards read weights predicted ahead.
  Numerics numerics() const override { return Numerics::Asynchronous; }
  /// Units (run.batch_size batches) whose gradients make one update.
  int micro_batches() const override { return options_.micro_batches; }

  /// 1F1B (full warm-up) with one U after the backward of each mini-batch's last micro-batch.
  Schedule schedule(int stages, int units) const override {
    Schedule s = schedules::one_f_one_b(stages, units);
    for (int d = 0; d < s.devices(); ++d) {
      std::vector<Action> kept;
      int last_backward = -1;
      for (const Action& a : s.device(d)) {
        if (a.kind == ActionKind::Backward) last_backward = a.mb;
        const bool closes = (last_backward + 1) % options_.micro_batches == 0 || last_backward + 1 == units;
        if (a.kind != ActionKind::Update || closes) kept.push_back(a);
      }
      s.device(d) = std::move(kept);
    }
    return s;
  }

  /// At most D - r micro-batches in flight at stage r (docs/schemes.md, "1F1B").
  std::vector<int> max_in_flight(int stages) const override {
    std::vector<int> bound;
    for (int r = 0; r < stages; ++r) bound.push_back(stages - r);
    return bound;
  }

  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<XpipePolicy>(stage, options_);
  }
  std::string optimizer_refused(const Optimizer& optimizer, int, int) const override {
    return xpipe_refuses(options_, optimizer);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Xpipe, "xpipe",
                 "asynchronous 1F1B over micro-batches, one update per mini-batch, forward and backward weights "
                 "predicted from Adam's moments (XPipe)");

}  // namespace pipelab
