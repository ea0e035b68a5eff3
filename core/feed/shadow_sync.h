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
/// How. An observer of every stage's actions (ActionObserver, core/exec/observer.h) records,
/// on the stage's thread: the dropout generator states before each forward, the weights each F and B read,
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
#include "core/exec/observer.h"
#include "core/scheme/scheme.h"
#include "core/weights/weights.h"

namespace pipelab {

/// The shadow: an observer of every stage (thread-safe; each stage's thread tells it what
/// its own stage does).
class ShadowSync final : public ActionObserver {
 public:
  /// `stages`: the run's; `replicas`: the same model split the same way (their own modules,
  /// generators and devices), which the shadow may overwrite at will.
  ShadowSync(std::vector<Stage*> stages, std::vector<std::unique_ptr<Stage>> replicas);

  // From the feed (any thread).
  void saw_input(int mb, const at::Tensor& x);
  void saw_target(int mb, const at::Tensor& y);
  void saw_documents(int mb, const at::Tensor& documents);
  void saw_loss_scale(int mb, double scale);

  // From stage r's actions, on its own thread (ActionObserver).
  /// Before the forward of `mb`, after the scheme's policy chose its weights.
  void forward(Stage& stage, int mb) override;
  /// Before the backward of `mb`, after the scheme's policy chose its weights.
  void backward(Stage& stage, int mb) override;
  /// The backward of `mb` is done: its gradient is part of the next update.
  void backward_done(Stage& stage, int mb) override;
  /// Right before the scheme's update: records the gradient and the weights it goes to,
  /// and computes the synchronous gradients of every update now complete on all stages.
  void before_update(Stage& stage) override;
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
  std::map<int, at::Tensor> inputs_, targets_, documents_;
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
  at::Tensor example_ids(int mb) override { return inner_.example_ids(mb); }
  nn::SequenceSegment segment(int mb) override { return inner_.segment(mb); }
  at::Tensor documents(int mb) override;

 private:
  Feed& inner_;
  ShadowSync* shadow_;
};

}  // namespace pipelab
