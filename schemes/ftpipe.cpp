/// `ftpipe`: FTPipe's asynchronous 1F1B pipelines with their staleness mitigations, alone or
/// combined (S. Eliad, I. Hakimi, A. De Jagger, M. Silberstein, A. Schuster, "Fine-tuning giant
/// neural networks on commodity hardware with automatic pipeline model parallelism", USENIX
/// ATC 2021, code saareliad/FTPipe; Gap-Aware: S. Barkai, I. Hakimi, A. Schuster, "Gap-Aware
/// Mitigation of Gradient Staleness", ICLR 2020). docs/schemes.md, "Gap-Aware on pipedream", docs/schemes.md, "ftpipe".
///
/// 1F1B with a flush per epoch (docs/schemes.md, "1F1B"). Micro-batch j of stage r has the expected staleness
/// d = min(j, w_r) (docs/schemes.md, "Gap-Aware on pipedream"); the last stage (d = 0) never predicts, stashes or
/// applies Gap-Aware.
/// - predictor (FTPipe's predictors, docs/schemes.md, "ftpipe"; schemes/ftpipe.h): the forward of j reads W_hat, the
///   weights after d more steps with zero gradients: `msnag` (SGD without decay, Adam, AdamW) or
///   `aggmsnag` (SGD with decay; Adam/AdamW with the gradient accumulated so far on the
///   first step). Plain msnag with SGD decay is an error, as in FTPipe. Each step uses the LR of
///   the next update, or with `sched_aware` (FTPipe's option, on in its language-model
///   configurations) the LR schedule's own for each simulated update. No prediction before the
///   stage's first update (docs/schemes.md, "Quirks").
///   `nag_with_predictor` (SGD, docs/schemes.md, "ftpipe"): a forward with d = 0 looks one NAG step ahead.
///   `nesterov_last_partition`: the last stage drops the predictor and trains with Nesterov SGD.
/// - stash: the forward's weights (W_hat when predicting) are kept for the backward of j
///   (PipeDream's weight stashing); `gap_aware_just_loss` keeps them for the Gap only and the
///   backward reads the real weights.
/// - gap_aware (SGD, Adam, AdamW; docs/schemes.md, "Gap-Aware on pipedream", core/weights/gap_aware.h): before the
/// update of j, its
///   gradient is divided by P = 1 + |W_stash - W| / C (lr |g| without a stash, SGD only), on
///   the stages of FTPipe's policy.
/// - recompute (FTPipe's default): the backward of j recomputes its forward on the weights it
///   reads (real: W_{N_e+j}; stashed); off, it uses the forward's activations with the
///   weights read at backward time (the mixed-version backward, docs/schemes.md, "Notation and optimizers").
/// Quirks (docs/schemes.md, "Quirks"), the intended behaviour by default, the code's behind a flag:
/// - `stash_aliases_live`: with a predictor, FTPipe's stash holds the live parameters, so
///   the backward reads the real weights and every Gap is 0 (msnag + stash = msnag).
/// - `gap_aware_raw_normaliser`: Adam's C = sqrt(S) + eps without bias correction.
/// - AdamW Gap-Aware on the stash path, which raises in FTPipe: implemented.
/// - `prediction_writes_grad`: Adam's aggmsnag with L2 decay adds lambda W into the
///   parameters' accumulated gradient at every predicting forward.
#include "schemes/ftpipe.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <set>

#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/util/error.h"
#include "core/weights/gap_aware.h"

namespace pipelab {
namespace ftpipe {

double msnag_coefficient(double momentum, int n) {
  double c = 0, power = 1;
  for (int k = 1; k <= n; ++k) c += (power *= momentum);
  return c;
}

at::Tensor predict_sgd(const at::Tensor& w, const at::Tensor& v, const at::Tensor& phi,
                       const Optimizer::SgdSettings& sgd, const std::vector<double>& lrs) {
  at::NoGradGuard no_grad;
  at::Tensor w_hat = w.clone();
  at::Tensor v_hat = v.defined() ? v.clone() : at::zeros_like(w);
  for (size_t k = 0; k < lrs.size(); ++k) {
    // e_k: the gradient so far on the first step, zero after, plus the coupled decay.
    at::Tensor e = k == 0 && phi.defined() ? phi.clone() : at::zeros_like(w);
    if (sgd.weight_decay != 0) e.add_(w_hat, sgd.weight_decay);
    if (sgd.momentum == 0) {
      w_hat.add_(e, -lrs[k]);
      continue;
    }
    v_hat.mul_(sgd.momentum).add_(e, 1 - sgd.dampening);
    w_hat.add_(sgd.nesterov ? e.add(v_hat, sgd.momentum) : v_hat, -lrs[k]);
  }
  return w_hat;
}

at::Tensor predict_nag(const at::Tensor& w, const at::Tensor& v, const at::Tensor& phi, double momentum, double lr) {
  at::NoGradGuard no_grad;
  at::Tensor w_hat = w.clone();
  if (v.defined()) w_hat.add_(v, -lr * momentum);
  if (phi.defined()) w_hat.add_(phi, -lr);
  return w_hat;
}

at::Tensor predict_adam(const at::Tensor& w, const at::Tensor& m, const at::Tensor& u, const at::Tensor& phi, int64_t t,
                        const Optimizer::AdamSettings& adam, const std::vector<double>& lrs) {
  at::NoGradGuard no_grad;
  at::Tensor w_hat = w.clone();
  at::Tensor m_hat = m.clone();
  const at::Tensor root_u = u.sqrt();
  const bool l2 = !adam.decoupled && adam.weight_decay != 0;
  for (size_t k = 0; k < lrs.size(); ++k) {
    const double step = static_cast<double>(t) + static_cast<double>(k + 1);
    const bool first_gradient = k == 0 && phi.defined();
    if (first_gradient || l2) {
      at::Tensor e = first_gradient ? phi.clone() : at::zeros_like(w);
      if (l2) e.add_(w_hat, adam.weight_decay);
      m_hat.mul_(adam.beta1).add_(e, 1 - adam.beta1);
    } else {
      m_hat.mul_(adam.beta1);
    }
    if (adam.decoupled && adam.weight_decay != 0) w_hat.mul_(1 - lrs[k] * adam.weight_decay);
    const at::Tensor denom = (root_u / std::sqrt(1 - std::pow(adam.beta2, step))).add_(adam.eps);
    w_hat.addcdiv_(m_hat, denom, -lrs[k] / (1 - std::pow(adam.beta1, step)));
  }
  return w_hat;
}

}  // namespace ftpipe

namespace {

enum class Predictor { None, Msnag, Aggmsnag };

struct FtpipeOptions {
  FlushOption flush;
  Predictor predictor = Predictor::None;
  bool nag_with_predictor = false;
  bool nesterov_last_partition = false;
  bool stash = false;
  GapAwareStages gap_aware = GapAwareStages::Off;
  bool gap_aware_just_loss = false;
  bool recompute = true;
  bool stash_aliases_live = false;
  bool gap_aware_raw_normaliser = false;
  bool prediction_writes_grad = false;
  bool sched_aware = false;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v.choice(
        "predictor", predictor,
        Choices<Predictor>{{"none", Predictor::None}, {"msnag", Predictor::Msnag}, {"aggmsnag", Predictor::Aggmsnag}},
        "forward weights predicted d = min(j, w_r) steps ahead: msnag (from the optimizer's momentum or moments) or "
        "aggmsnag (simulated steps that include the accumulated gradient)");
    v("nag_with_predictor", nag_with_predictor, "SGD: a forward with d = 0 looks one NAG step ahead");
    v("nesterov_last_partition", nesterov_last_partition,
      "the last stage drops the predictor and uses SGD with Nesterov momentum (FTPipe's "
      "nesterov_set_for_last_partition)");
    v("stash", stash, "keep each forward's weights (the predicted ones when predicting) for its backward");
    v.choice("gap_aware", gap_aware, gap_aware_stage_choices(),
             "Gap-Aware penalty on these stages' stale gradients (SGD, Adam or AdamW)");
    v("gap_aware_just_loss", gap_aware_just_loss, "the stash serves only the Gap: the backward reads the real weights");
    v("recompute", recompute, "the backward recomputes its forward on the weights it reads (FTPipe's default)");
    v("stash_aliases_live", stash_aliases_live,
      "with a predictor the stash aliases the live weights: the backward reads them and the Gap is 0 (FTPipe's "
      "code; fidelity)");
    v("gap_aware_raw_normaliser", gap_aware_raw_normaliser,
      "Adam/AdamW Gap-Aware: C = sqrt(S) + eps without bias correction (FTPipe's code; fidelity)");
    v("sched_aware", sched_aware,
      "predict with the LR schedule's future LRs for the simulated updates (FTPipe's sched_aware; default: "
      "the next update's LR for all of them)");
    v("prediction_writes_grad", prediction_writes_grad,
      "Adam aggmsnag with L2 decay adds lambda W into the accumulated gradient at each prediction (FTPipe's code; "
      "fidelity)");
  }
  void check(const ConfigNode& node) const {
    const bool predicting = predictor != Predictor::None;
    if (nag_with_predictor && !predicting) {
      node.child("nag_with_predictor")
          .fail("nag_with_predictor extends a predictor",
                "set predictor: aggmsnag (or msnag), or drop nag_with_predictor");
    }
    if (gap_aware_just_loss && (gap_aware == GapAwareStages::Off || !stash)) {
      node.child("gap_aware_just_loss")
          .fail("gap_aware_just_loss keeps a stash for Gap-Aware's Gap only",
                "set stash: true and a gap_aware policy, or drop gap_aware_just_loss");
    }
    if (stash_aliases_live && (!predicting || !stash)) {
      node.child("stash_aliases_live")
          .fail("the stash aliases the live weights only when a predictor and the stash are both on",
                "set a predictor and stash: true, or drop stash_aliases_live");
    }
    if (prediction_writes_grad && predictor != Predictor::Aggmsnag) {
      node.child("prediction_writes_grad")
          .fail("writing lambda W into the gradient is a side effect of the aggmsnag predictor only",
                "set predictor: aggmsnag, or drop prediction_writes_grad");
    }
  }
};

std::string refusal(const std::string& what, const std::string& fix) {
  return "scheme ftpipe: " + what + ". Fix: " + fix;
}

/// What Ftpipe::optimizer_refused says for stage `stage` of `stages`: the predictors and
/// Gap-Aware are written for SGD, Adam and AdamW; the NAG variants for SGD.
std::string ftpipe_refuses(const FtpipeOptions& o, const Optimizer& optimizer, int stage, int stages) {
  const auto sgd = optimizer.sgd_settings();
  const auto adam = optimizer.adam_settings();
  const bool last = stage + 1 == stages;
  if (o.predictor != Predictor::None) {
    if (!sgd && !adam) {
      return refusal("its predictors are SGD's, Adam's and AdamW's",
                     "use optimizer sgd, adam or adamw, or predictor: none");
    }
    if (sgd && o.predictor == Predictor::Msnag && sgd->weight_decay != 0) {
      return refusal("predictor msnag has no weight decay term, and FTPipe refuses it with decay",
                     "use predictor: aggmsnag, or weight_decay: 0");
    }
    if (o.nag_with_predictor && !sgd) {
      return refusal("nag_with_predictor is SGD's", "use optimizer sgd, or nag_with_predictor: false");
    }
  }
  if (o.nesterov_last_partition && last && (!sgd || sgd->momentum <= 0 || sgd->dampening != 0)) {
    return refusal("nesterov_last_partition needs SGD with momentum > 0 and dampening 0",
                   "use optimizer {type: sgd, momentum: 0.9}, or nesterov_last_partition: false");
  }
  if (gap_aware_at(o.gap_aware, stage, stages) && !sgd && !adam) {
    return refusal("gap_aware is implemented for SGD, Adam and AdamW (FTPipe's sgd, adam and adamw gap-aware)",
                   "use optimizer sgd, adam or adamw, or gap_aware: off");
  }
  return "";
}

class FtpipePolicy : public StagePolicy {
 public:
  FtpipePolicy(Stage& stage, const FtpipeOptions& o)
      : o_(o),
        swap_(stage),
        warmup_(warmup(stage.index(), stage.count())),
        last_(stage.is_last()),
        predicts_(o.predictor != Predictor::None && !(last_ && o.nesterov_last_partition)),
        // FTPipe's aliased stash (`stash_aliases_live`, docs/schemes.md, "Quirks") is no stash at all for
        // the backward.
        stashes_(o.stash && !last_ && !(o.stash_aliases_live && predicts_)),
        gap_aware_(gap_aware_at(o.gap_aware, stage.index(), stage.count())),
        ga_(o.gap_aware_raw_normaliser) {
    const std::string refused = ftpipe_refuses(o, stage.optimizer(), stage.index(), stage.count());
    if (!refused.empty()) throw UserError(refused);
    if (o.nesterov_last_partition && last_) stage.optimizer().set_nesterov(true);
  }

  bool checkpoint(int) const override { return o_.recompute && !last_; }

  void before_forward(Stage& stage, int mb, Message&) override {
    const int64_t live = stage.optimizer().steps();
    const int64_t d = ftpipe::expected_staleness(mb, warmup_);
    staleness_[mb] = d;
    // No prediction before the first update: the optimizer has no state yet (docs/schemes.md, "Quirks").
    const int64_t ahead = !predicts_ || live == 0 ? 0 : d > 0 ? d : o_.nag_with_predictor ? 1 : 0;
    target_[mb] = live + ahead;
    record_.forward(mb, live + ahead);
    if (ahead == 0) {
      if (stashes_) stash_[mb] = copy_weights(stage);
      return;
    }
    Weights predicted = predict(stage, ahead, d == 0);
    swap_.swap_in(predicted);
    // The backward reads W_hat if stashed; on the last stage too, where forward and backward
    // are adjacent (a NAG look-ahead's gradient is taken at the look-ahead).
    if (last_ || stashes_) stash_[mb] = std::move(predicted);
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }

  void before_backward(Stage& stage, int mb) override {
    auto it = stash_.find(mb);
    const bool read_stash = it != stash_.end() && (last_ || !o_.gap_aware_just_loss);
    record_.backward(stage, mb, read_stash ? target_.at(mb) : stage.optimizer().steps());
    if (read_stash) swap_.swap_in(it->second);
  }
  void after_backward(Stage&, int mb) override {
    swap_.restore();
    auto it = stash_.find(mb);
    if (gap_aware_) {
      gap_from_ = it != stash_.end() ? std::move(it->second) : Weights();
      gap_staleness_ = staleness_.at(mb);
    }
    if (it != stash_.end()) stash_.erase(it);
    staleness_.erase(mb);
    target_.erase(mb);
  }

  void update(Stage& stage) override {
    if (gap_aware_) {
      // The aliased stash (`stash_aliases_live`) measures the live weights against themselves:
      // Gap 0, P = 1.
      if (o_.stash_aliases_live && predicts_) gap_from_ = copy_weights(stage);
      ga_.before_step(stage, gap_staleness_, gap_from_.empty() ? nullptr : &gap_from_);
      record_.add(stage, "gap_aware_penalty", ga_.mean_penalty());
      gap_from_.clear();
    }
    stage.step();
    record_.add(stage, "stored_versions", static_cast<double>(1 + stash_.size()));
  }
  void end(Stage&) override { stash_.clear(); }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  /// The stash is empty at every flush; Gap-Aware's statistics carry over.
  c10::IValue state() const override { return gap_aware_ ? ga_.state() : c10::IValue(); }
  void load_state(Stage& stage, const c10::IValue& s) override {
    if (gap_aware_) ga_.load_state(stage, s);
  }

 private:
  /// The weights `steps` updates ahead (FTPipe's predictors, docs/schemes.md, "ftpipe"), or one NAG
  /// step ahead when `nag`.
  Weights predict(Stage& stage, int64_t steps, bool nag) {
    at::NoGradGuard no_grad;
    Optimizer& optimizer = stage.optimizer();
    const std::vector<at::Tensor> params = stage.parameters();
    const double lr = stage.scheduled_lr();
    std::vector<double> lrs(static_cast<size_t>(steps), lr);
    if (o_.sched_aware) {
      for (int64_t k = 0; k < steps; ++k) lrs[static_cast<size_t>(k)] = stage.lr_at(optimizer.steps() + k);
    }
    const bool aggregate = o_.predictor == Predictor::Aggmsnag;
    Weights out;
    if (const auto sgd = optimizer.sgd_settings()) {
      for (size_t i = 0; i < params.size(); ++i) {
        const at::Tensor w = params[i].detach();
        if (!optimizer.last_gradient(i).defined()) {  // never updated: no state to predict from
          out.push_back(w.clone());
          continue;
        }
        const at::Tensor v = sgd->momentum > 0 ? optimizer.direction(i) : at::Tensor();
        const at::Tensor phi = aggregate || nag ? params[i].grad() : at::Tensor();
        out.push_back(nag ? ftpipe::predict_nag(w, v, phi, sgd->momentum, lr)
                          : ftpipe::predict_sgd(w, v, phi, *sgd, lrs));
      }
      return out;
    }
    const Optimizer::AdamSettings adam = *optimizer.adam_settings();
    std::map<std::string, at::Tensor> state;
    for (auto& [name, tensor] : optimizer.state()) state.emplace(name, tensor);
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor w = params[i].detach();
      const auto m = state.find(std::to_string(i) + ".exp_avg"), u = state.find(std::to_string(i) + ".exp_avg_sq");
      if (m == state.end() || u == state.end()) {
        out.push_back(w.clone());
        continue;
      }
      const at::Tensor phi = aggregate ? params[i].grad() : at::Tensor();
      out.push_back(ftpipe::predict_adam(w, m->second, u->second, phi, optimizer.steps(), adam, lrs));
      // `prediction_writes_grad` (docs/schemes.md, "Quirks"): FTPipe's loop adds lambda W into p.grad (a
      // zero tensor after torch 1.x's zero_grad).
      if (o_.prediction_writes_grad && !adam.decoupled && adam.weight_decay != 0) {
        const at::Tensor g = params[i].grad();
        params[i].mutable_grad() = (g.defined() ? g : at::zeros_like(w)) + w * adam.weight_decay;
      }
    }
    return out;
  }

  FtpipeOptions o_;
  WeightSwap swap_;
  int warmup_;
  bool last_, predicts_, stashes_, gap_aware_;
  GapAware ga_;
  std::map<int, Weights> stash_;      ///< in-flight micro-batches: the weights their backward reads
  std::map<int, int64_t> staleness_;  ///< the expected staleness d per in-flight micro-batch
  std::map<int, int64_t> target_;     ///< the version each forward's weights stand for
  Weights gap_from_;                  ///< the stash of the micro-batch about to be applied
  int64_t gap_staleness_ = 0;
  StalenessRecorder record_;
};

/// Its work on stage r's weights, as FtpipePolicy does it: a forward that predicts (from the
/// first update on, d > 0 updates ahead, or one NAG step) predicts and swaps the prediction
/// in, keeping it for the backward where the stage stashes or is the last; one that does not
/// copies the live weights into the stash; a backward reading its stash swaps it in (3); an
/// update under Gap-Aware first reads the gradients, the optimizer's statistics and the
/// stash as a step does (priced as one, like a prediction) and, with the aliased stash,
/// copies the live weights.
WeightWorks ftpipe_work(const std::vector<Action>& actions, const FtpipeOptions& o, int r, int stages) {
  const bool last = r + 1 == stages;
  const bool predicts = o.predictor != Predictor::None && !(last && o.nesterov_last_partition);
  const bool stashes = o.stash && !last && !(o.stash_aliases_live && predicts);
  const bool gap_aware = gap_aware_at(o.gap_aware, r, stages);
  WeightWorks work(actions.size());
  int updates = 0;
  std::set<int> stashed;  // micro-batches whose forward's weights wait for their backward
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      if (gap_aware) work[i] = {o.stash_aliases_live && predicts ? 1.0 : 0.0, 1};
      ++updates;
    } else if (a.kind == ActionKind::Forward) {
      const int64_t d = ftpipe::expected_staleness(a.mb, warmup(r, stages));
      const bool ahead = predicts && updates > 0 && (d > 0 || o.nag_with_predictor);
      if (ahead) work[i] = {kSwapCopies, 1};
      if (!ahead && stashes) work[i].copies = 1;
      if ((ahead && (last || stashes)) || (!ahead && stashes)) stashed.insert(a.mb);
    } else if (kind_info(a.kind).takes_gradients && stashed.erase(a.mb) > 0 && (last || !o.gap_aware_just_loss)) {
      work[i].copies = kSwapCopies;
    }
  }
  return work;
}

class Ftpipe : public OneFOneBScheme<FtpipeOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  /// A stash holds a set per mini-batch in flight (D - r); a predictor swaps its weights in
  /// (the live ones wait aside); recompute keeps only a micro-batch's input (not on the last
  /// stage, FtpipePolicy::checkpoint).
  StageMemory stage_memory(int stage, int stages) const override {
    const double swap = options_.predictor != Predictor::None ? 1 : 0;
    const double stash = options_.stash ? stages - stage : 0;
    return {1 + swap + stash, options_.recompute && stage + 1 < stages};
  }
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    return ftpipe_work(stage_actions, options_, stage, stages);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<FtpipePolicy>(stage, options_);
  }
  std::string optimizer_refused(const Optimizer& optimizer, int stage, int stages) const override {
    return ftpipe_refuses(options_, optimizer, stage, stages);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Ftpipe, "ftpipe", "asynchronous 1F1B with FTPipe's weight prediction, stashing and Gap-Aware");

}  // namespace pipelab
