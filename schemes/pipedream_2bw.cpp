/// `pipedream_2bw`: PipeDream-2BW (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN
/// Training", ICML 2021, arXiv:2006.09503), as the reference code on msr-fiddle/pipedream's
/// `pipedream_2bw` branch (9fa62318cec0) computes it: Megatron's
/// `forward_backward_pipelining_no_flushes` and its fp16 optimizer's buffer swaps. The versions
/// and the update rule are those of docs/schemes.md, "pipedream_2bw", the flushed variant's rule and bound
/// those of docs/schemes.md, "pipedream_flush", and the reference code's quirks are listed in docs/schemes.md,
/// "Quirks". Two weight buffers per stage, the gradient of each mini-batch accumulated over its micro-batches, one
/// update per mini-batch, never a flush.
///
/// Units. A run unit (one `run.batch_size` batch of the loader) is a *micro-batch*, and
/// `micro_batches` (m) consecutive units make one mini-batch, i.e. one update: the mini-batch
/// holds m x run.batch_size examples (Megatron's micro-batch size and global batch size).
/// The last mini-batch of a run may have fewer micro-batches; its gradient is their mean.
/// The runner's LR schedule counts micro-batches, so each update takes the LR of its
/// mini-batch's first micro-batch. `micro_batches` defaults to 4, a small pipeline-filling
/// value: the public driver's 32 (global batch 256 / micro-batch 8) is a sweep setting.
///
/// Semantics (stage r of D, mini-batch k of the run, w_r = min(D-1-r, m)):
/// - schedule: w_r warm-up forwards once, then 1F1B pairs (F of unit w_r+i, B of unit i), an
///   update after the B of every mini-batch's last micro-batch, and a cool-down only at the
///   end of the run. So iteration k's backwards are B_k's micro-batches and its forwards are
///   the last m-w_r of B_k, then the first w_r of B_{k+1}.
/// - versions (docs/schemes.md, "pipedream_2bw"): every forward and backward of B_k reads W_{max(k-1,0)}: the live
/// weights
///   W_k for B_{k+1}'s forwards in iteration k, the "older" buffer W_{k-1} for the rest.
///   Forward and backward read the same weights, so each gradient is exact for them.
/// - update (docs/schemes.md, "pipedream_2bw"): W_{k+1} = Opt(W_k, mean over B_k of the gradients at W_{max(k-1,0)}):
/// one
///   optimizer state, advanced once per mini-batch with a gradient one step stale (zero at
///   the first step after a start). The older buffer takes W_k just before the step.
///   At D = 1 this is still one-step-delayed SGD, not single-device training (derived).
/// - metrics: forward and backward gaps (1 from the second mini-batch on, every stage) and
///   `stored_versions` (2) in metrics/stages.csv, as schemes/pipedream.cpp records them.
///
/// How each point of the reference code became a default or an option:
/// - verified in the reference code: the schedule, the versions, the update, the clamp w_r <= m, one
///   optimizer state, no flush between iterations (Megatron counts iterations) -> the
///   defaults; `flush: never` (the reference's behaviour) carries the pipeline
///   across epochs (such runs cannot resume or run as several processes yet).
///   `flush: epoch` drains at every epoch end and restarts with both buffers equal to the
///   live weights, as the reference code's restart (`first_iteration`) does; its first
///   update is then not stale.
/// - quirks of the reference code (docs/schemes.md, "Quirks", where the correct behaviour is the
///   default): its fp16 optimizer's shortcut (no unscaling, overflow check or clipping with
///   stashing) — fp16 updates here go through Stage::step like every scheme's (unscale, skip
///   on overflow), and the gradient clip applies when set; no fidelity flag. Its fp16-only
///   double buffer (fp32 groups not double-buffered) — any precision, every parameter. Its
///   evaluation on the older buffer (it reads W_{k-1}) — evaluation reads the live W_k; no
///   fidelity flag, since evaluation does not go through the policy. Its skipped
///   tied-embedding all-reduce — tied copies sum their gradients (tied weights,
///   docs/schemes.md, "Notation and optimizers"); `optimizer.tied_gradients: separate` reproduces the skip.
/// - UNVERIFIED (the paper's wording of the constraint, m >= D?) -> `require_m_ge_d`, off:
///   when on, micro_batches < stages is an error; off, the code's clamp w_r = min(D-1-r, m)
///   keeps any m valid (two buffers suffice whenever w_r <= m, derived).
/// - with Muon this is the one-step-delayed pipeline of arXiv:2606.30634 (docs/schemes.md, "Notation and optimizers");
///   its error-feedback correction, whose equation was not read (docs/schemes.md, "Quirks"), is
///   `error_feedback` in pipelab's own form (above the options), 0 (off) by default.
/// - paper hyperparameters (UNVERIFIED) and the public driver's (Adam, lr 1.5e-5, ...) are
///   experiment settings, not scheme options.
///
/// `pipedream_flush` (schemes/pipedream_flush.cpp) checked against its update rule (docs/schemes.md
/// docs/schemes.md, "pipedream_flush"; Megatron's `forward_backward_pipelining`): it agrees. Per mini-batch it runs the
/// 1F1B generator, whose warm-up min(D-1-r, m) is Megatron's, then one update; one weight version;
/// micro-batch losses scaled by n_i/N, which is Megatron's 1/m when the micro-batches are equal
/// (chunk semantics also allow a smaller last one); the same numbers as GPipe (its test, 1e-12 in
/// float64). Two remarks: its in-flight bound D-r equals w_r+1 (docs/schemes.md, "pipedream_flush") unless m < D-r-1
/// (then it is loose, not wrong); and its `chunks` splits run.batch_size, whereas this scheme's `micro_batches`
/// groups run.batch_size batches, so equal settings mean different batches.
#include <ATen/ATen.h>

#include <algorithm>

#include "core/schedule/weight_copies.h"
#include "core/scheme/lr_at_unit.h"
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/scheme.h"
#include "core/scheme/staleness.h"
#include "core/util/error.h"
#include "core/weights/weights.h"

namespace pipelab {
namespace {

using Flush = FlushOption::Flush;  // its default differs: never

/// pipelab's form of the error-feedback correction of arXiv:2606.30634 (docs/schemes.md, "Notation and optimizers" and
/// docs/schemes.md, "Quirks"): the paper's equation was not read, so this is configuration, off by
/// default. With coefficient c, the update direction d_k (W_{k+1} = W_k (1 - lr lambda) - lr d_k)
/// becomes d_k + c (d_k - d_{k-1}), or the gradient g_k becomes g_k + c (g_k - g_{k-1}) before
/// the optimizer; the first step of a run uses its own as the previous one.
enum class FeedbackOn { Update, Gradient };

struct Pipedream2bwOptions {
  int micro_batches = 4;
  Flush flush = Flush::Never;
  bool require_m_ge_d = false;
  double error_feedback = 0;
  FeedbackOn error_feedback_on = FeedbackOn::Update;
  template <class V>
  void fields(V& v) {
    v("micro_batches", micro_batches,
      "micro-batches (run.batch_size batches) per mini-batch: the gradients of m of them make one update", positive);
    v.choice("flush", flush, Choices<Flush>{{"never", Flush::Never}, {"epoch", Flush::Epoch}},
             "never: one pipeline across epochs (the reference code); epoch: drain and restart at every epoch end");
    v("require_m_ge_d", require_m_ge_d,
      "reject micro_batches < stages, the paper's constraint as commonly stated (UNVERIFIED); "
      "off, the warm-up is clamped to m as in the reference code");
    v("error_feedback", error_feedback,
      "coefficient c of pipelab's own error-feedback form (the paper's equation was not read): "
      "d_k + c (d_k - d_{k-1}); 0 is off", in_range(0, 10));
    v.choice("error_feedback_on", error_feedback_on,
             Choices<FeedbackOn>{{"update", FeedbackOn::Update}, {"gradient", FeedbackOn::Gradient}},
             "what the correction extrapolates: the optimizer's update direction, or the gradient before it");
    v.unused_unless("error_feedback_on", error_feedback > 0, "error_feedback > 0 (the correction is off)");
  }
};

/// The reference code's schedule over `units` micro-batches, `m` per mini-batch, as a pure
/// function: warm-up w_r = min(D-1-r, m) once, then F(w_r+i) B(i) pairs, U after the last
/// micro-batch of each mini-batch, the remaining backwards at the end.
Schedule two_bw_schedule(int stages, int units, int m) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    auto& a = s.device(r);
    const int warmup = std::min({stages - 1 - r, m, units});
    const auto backward = [&](int i) {
      a.push_back(Action::B(r, i));
      if ((i + 1) % m == 0 || i + 1 == units) a.push_back(Action::U(r));
    };
    for (int j = 0; j < warmup; ++j) a.push_back(Action::F(r, j));
    for (int i = 0; i + warmup < units; ++i) {
      a.push_back(Action::F(r, warmup + i));
      backward(i);
    }
    for (int i = std::max(0, units - warmup); i < units; ++i) backward(i);
  }
  return s;
}

/// Two weight buffers per stage (docs/schemes.md, "pipedream_2bw"): the live parameters are the newer one
/// (W_k, what the optimizer steps and evaluation reads), `older_` holds W_{k-1}.
class TwoBufferPolicy : public StagePolicy {
 public:
  TwoBufferPolicy(Stage& stage, int m, double feedback, FeedbackOn on)
      : m_(m), feedback_(feedback), on_(on), swap_(stage) {}

  void begin(Stage& stage, int micro_batches) override {
    // A start or a restart after a flush: both buffers hold the live weights.
    older_ = copy_weights(stage);
    units_in_run_ = micro_batches;
    updates_ = 0;
    accumulated_ = 0;
    previous_.clear();
  }
  void before_forward(Stage& stage, int mb, Message&) override { record_.forward(mb, read(stage, mb)); }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, read(stage, mb)); }
  void after_backward(Stage&, int) override {
    swap_.restore();
    ++accumulated_;
  }

  void update(Stage& stage) override {
    at::NoGradGuard no_grad;
    // The mean over the mini-batch's micro-batches (Megatron divides each micro-batch's loss by m).
    average_gradients(stage, accumulated_);
    // The older buffer takes W_k; the optimizer then steps the live one to W_{k+1}.
    const std::vector<at::Tensor> params = stage.parameters();
    for (size_t i = 0; i < params.size(); ++i) older_[i].copy_(params[i].detach());
    if (feedback_ != 0 && on_ == FeedbackOn::Gradient) extrapolate_gradients(params);
    stage.step(lr_factor_at_unit(stage, units_before_ + updates_ * m_, "pipedream_2bw"));
    if (feedback_ != 0 && on_ == FeedbackOn::Update) extrapolate_update(stage, params);
    ++updates_;
    accumulated_ = 0;
    record_.add(stage, "stored_versions", 2.0);
  }

  void end(Stage&) override { units_before_ += units_in_run_; }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  /// The runner steps (micro-batches) of the runs before, for the LR of later updates after
  /// a resume (flush: epoch; the buffers themselves restart equal at every run).
  c10::IValue state() const override { return c10::IValue(units_before_); }
  void load_state(Stage&, const c10::IValue& state) override { units_before_ = state.isInt() ? state.toInt() : 0; }

 private:
  /// Puts in the weights micro-batch `mb` reads, W_{max(k-1,0)} for its mini-batch k (docs/schemes.md,
  /// "pipedream_2bw"), and returns the optimizer step they stand for.
  int64_t read(Stage& stage, int mb) {
    const int64_t wanted = std::max<int64_t>(mb / m_ - 1, 0);  // updates of this run the weights have seen
    const int64_t live = stage.optimizer().steps();
    if (wanted == updates_) return live;
    PIPELAB_ASSERT(wanted + 1 == updates_,
                   "stage {}: micro-batch {} needs the weights after update {} of the run, but "
                   "the stage holds only those after updates {} and {}",
                   stage.index(), mb, wanted, updates_ - 1, updates_);
    swap_.swap_in(older_);
    return live - 1;
  }

  /// g_k <- g_k + c (g_k - g_{k-1}).
  void extrapolate_gradients(const std::vector<at::Tensor>& params) {
    std::vector<at::Tensor> raw;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor g = params[i].grad();
      raw.push_back(g.defined() ? g.clone() : at::Tensor());
      if (g.defined() && previous_.size() == params.size() && previous_[i].defined()) {
        params[i].mutable_grad().add_(g - previous_[i], feedback_);
      }
    }
    previous_ = std::move(raw);
  }

  /// W_{k+1} -= lr c (d_k - d_{k-1}), d_k read back from the step the optimizer took:
  /// d_k = (W_k (1 - lr lambda) - W_{k+1}) / lr, lambda its decoupled decay.
  void extrapolate_update(Stage& stage, const std::vector<at::Tensor>& params) {
    const double lr = stage.optimizer().lr();
    if (lr == 0) return;
    const double keep = 1 - lr * stage.optimizer().decoupled_decay();
    std::vector<at::Tensor> d;
    for (size_t i = 0; i < params.size(); ++i) {
      // Through .data(), as the optimizer steps (core/optim/optimizer.cpp): not autograd's
      // version counter, which the graphs of the micro-batches in flight check.
      at::Tensor w = params[i].data();
      d.push_back((older_[i] * keep - w) / lr);
      if (previous_.size() == params.size()) w.sub_(d.back() - previous_[i], lr * feedback_);
    }
    previous_ = std::move(d);
  }

  int64_t m_;
  double feedback_;
  FeedbackOn on_;
  std::vector<at::Tensor> previous_;  ///< d_{k-1} or g_{k-1} of the error feedback (empty: none yet)
  WeightSwap swap_;
  Weights older_;
  int64_t units_in_run_ = 0, units_before_ = 0;
  int64_t updates_ = 0;  ///< updates in this run
  int accumulated_ = 0;  ///< micro-batches whose gradients wait for the next update
  StalenessRecorder record_;
};

class Pipedream2bw : public Configured<Scheme, Pipedream2bwOptions> {
 public:
  using Configured::Configured;
  /// Double-buffered weights (PipeDream-2BW section 3.1): the live ones, the older buffer, and the
  /// live values set aside while the older are swapped in (core/weights/weights.h).
  StageMemory stage_memory(int, int) const override { return {3, false}; }
  Span span() const override { return options_.flush == Flush::Never ? Span::Run : Span::Epoch; }
  /// A gradient meets the weights one update old (the double buffer): stale, bounded.
  Numerics numerics() const override { return Numerics::Asynchronous; }
  /// Its forwards read the older buffer, W_{k-1} while W_k is live (docs/schemes.md, "pipedream_2bw").
  int forward_lag() const override { return 1; }
  /// The older buffer's copy before each update, and each action that reads it swapped in.
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int, int) const override {
    return double_buffer_copies(stage_actions, options_.micro_batches);
  }
  /// Units (run.batch_size batches) whose gradients make one update.
  int micro_batches() const override { return options_.micro_batches; }

  Schedule schedule(int stages, int units) const override {
    if (options_.require_m_ge_d && options_.micro_batches < stages) {
      fail("micro_batches",
           fmt::format("{} micro-batches per mini-batch for {} stages, and require_m_ge_d is on",
                       options_.micro_batches, stages),
           fmt::format("set micro_batches >= {}, or require_m_ge_d: false", stages));
    }
    return two_bw_schedule(stages, units, options_.micro_batches);
  }

  /// w_r + 1 = min(D - r, m + 1) micro-batches in flight at stage r (the flushed variant's bound,
  /// docs/schemes.md, "pipedream_flush", which 2BW shares).
  std::vector<int> max_in_flight(int stages) const override {
    std::vector<int> bound;
    for (int r = 0; r < stages; ++r) bound.push_back(std::min(stages - r, options_.micro_batches + 1));
    return bound;
  }

  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<TwoBufferPolicy>(stage, options_.micro_batches, options_.error_feedback,
                                             options_.error_feedback_on);
  }
};

}  // namespace

PIPELAB_REGISTER(
    Scheme, Pipedream2bw, "pipedream_2bw",
    "two weight buffers, micro-batch gradients accumulated, one-step-delayed updates, no flush (PipeDream-2BW)");

}  // namespace pipelab
