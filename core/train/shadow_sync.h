#pragma once
/// `run.shadow: sync` — for any scheme, the gradient synchronous training would have
/// computed at each update, next to the one the scheme applied (no framework we know of
/// reports it; staleness papers argue about it in words).
///
/// Definition. Stage r's k-th update applies the gradient its backwards left since its
/// previous update, for a set S of micro-batches. Synchronous training at that point would
/// compute the gradient of the same micro-batches' loss with every stage at its version k
/// (its weights right before its own k-th update), end to end, with the same dropout masks.
/// Both are compared per stage (cosine, relative norm difference), and the weights the
/// forwards and backwards of S read are compared with the weights the update is applied to
/// (relative distance). For a synchronous scheme the two gradients are equal: the tests
/// hold every measurement to that.
///
/// How. A wrapper policy around each stage's own (ShadowPolicy) records, on the stage's
/// thread: the dropout generator states before each forward, the weights each F and B read,
/// the micro-batches of each update, the gradient and the weights at the update. A wrapper
/// feed (ShadowFeed) keeps the inputs, targets and loss shares. Once every stage has made
/// its k-th update, a replica of the model (its own stages, never seen by the executor)
/// takes the version-k weights and recomputes the synchronous gradient. Nothing of the run
/// is written: parameters, gradients and generators are only read, so the run's numbers are
/// bitwise those of a run without the shadow (tested). Cost: the replica, the weights of
/// the updates not yet complete on every stage, one weight copy per micro-batch in flight
/// per pass, and one synchronous forward and backward per update.
///
/// Limits (clear errors at start): every stage must live in this process (sequential or
/// threaded executor), the stages must split one model (not data-parallel replicas), and no
/// fp16 loss scaling (its scaled gradients and skipped updates have no synchronous twin).
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "core/exec/executor.h"
#include "core/scheme/scheme.h"
#include "core/weights/weights.h"

namespace pipelab {

class ShadowSync {
 public:
  /// `stages`: the run's; `replicas`: the same model split the same way (their own modules,
  /// generators and devices), which the shadow may overwrite at will.
  ShadowSync(std::vector<Stage*> stages, std::vector<std::unique_ptr<Stage>> replicas);

  // From the feed (any thread).
  void saw_input(int mb, const at::Tensor& x);
  void saw_target(int mb, const at::Tensor& y);
  void saw_loss_scale(int mb, double scale);

  // From stage r's policy wrapper, on its own thread.
  /// Before the forward of `mb`, after the scheme's policy chose its weights.
  void forward(Stage& stage, int mb);
  /// Before the backward of `mb`, after the scheme's policy chose its weights.
  void backward(Stage& stage, int mb);
  /// The backward of `mb` is done: its gradient is part of the next update.
  void backward_done(Stage& stage, int mb);
  /// Right before the scheme's update: records the gradient and the weights it goes to,
  /// and computes the synchronous gradients of every update now complete on all stages.
  void before_update(Stage& stage);
  /// Moves stage r's measurements into `out`.
  void collect(int r, std::vector<StageMetric>& out);

 private:
  struct Update {
    std::vector<int> mbs;
    Weights weights, grads;
    double forward_distance = 0, backward_distance = 0;
  };
  /// Synchronous gradients of update k, once all stages made it (under the lock).
  void compute(int64_t k);
  /// The replicas' block gradients for micro-batches `mbs` with stage weights `weights`.
  std::vector<Weights> synchronous_gradients(const std::vector<int>& mbs, const std::vector<const Weights*>& weights);

  std::vector<Stage*> stages_;
  std::vector<std::unique_ptr<Stage>> replicas_;
  std::mutex mutex_;
  std::map<int, at::Tensor> inputs_, targets_;
  std::map<int, double> scales_;
  std::map<std::pair<int, int>, std::vector<at::Tensor>> rng_;  ///< (stage, mb) -> generator states
  std::map<std::pair<int, int>, Weights> read_forward_, read_backward_;
  std::vector<std::vector<int>> pending_;                  ///< per stage: mbs since its last update
  std::map<int64_t, std::map<int, Update>> updates_;       ///< k -> stage -> its k-th update
  std::vector<std::vector<StageMetric>> rows_;
};

/// The feed seen by the executor when the shadow runs: the run's feed, with what the shadow
/// needs kept on the way.
class ShadowFeed : public Feed {
 public:
  ShadowFeed(Feed& inner, ShadowSync* shadow) : inner_(inner), shadow_(shadow) {}
  at::Tensor input(int mb) override;
  at::Tensor target(int mb) override;
  double loss_scale(int mb) override;
  void on_result(int mb, const MicroBatchResult& r) override { inner_.on_result(mb, r); }

 private:
  Feed& inner_;
  ShadowSync* shadow_;
};

/// Wraps a scheme's policy. Every hook is forwarded (a hook left to StagePolicy's default
/// would silently drop the scheme's own: tests/schemes/flushless_hooks_test.cpp holds this
/// class, like EpochSnapshot, to the whole interface).
class ShadowPolicy final : public StagePolicy {
 public:
  ShadowPolicy(std::unique_ptr<StagePolicy> inner, ShadowSync& shadow, int stage)
      : inner_(std::move(inner)), shadow_(shadow), stage_(stage) {}

  void begin(Stage& s, int micro_batches) override { inner_->begin(s, micro_batches); }
  bool checkpoint(int mb) const override { return inner_->checkpoint(mb); }
  void before_forward(Stage& s, int mb, Message& in) override {
    inner_->before_forward(s, mb, in);
    shadow_.forward(s, mb);
  }
  void after_forward(Stage& s, int mb, Message& out) override { inner_->after_forward(s, mb, out); }
  void before_backward(Stage& s, int mb) override {
    inner_->before_backward(s, mb);
    shadow_.backward(s, mb);
  }
  Message backward(Stage& s, int mb, const std::vector<Message>& in) override { return inner_->backward(s, mb, in); }
  Message backward_input(Stage& s, int mb, const std::vector<Message>& in) override {
    return inner_->backward_input(s, mb, in);
  }
  void backward_weight(Stage& s, int mb) override { inner_->backward_weight(s, mb); }
  void after_backward(Stage& s, int mb) override {
    inner_->after_backward(s, mb);
    shadow_.backward_done(s, mb);
  }
  Message head(Stage& s, int mb) override { return inner_->head(s, mb); }
  void update(Stage& s) override {
    shadow_.before_update(s);
    inner_->update(s);
  }
  void end(Stage& s) override { inner_->end(s); }
  void collect(std::vector<StageMetric>& out) override {
    inner_->collect(out);
    shadow_.collect(stage_, out);
  }
  c10::IValue state() const override { return inner_->state(); }
  void load_state(Stage& s, const c10::IValue& state) override { inner_->load_state(s, state); }

 private:
  std::unique_ptr<StagePolicy> inner_;
  ShadowSync& shadow_;
  int stage_;
};

}  // namespace pipelab
