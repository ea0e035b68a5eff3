/// `paci`: PACI (Elam, Rahimi, Mendelson, Baskin, "Breaking the Bubble: Asynchronous Pipeline
/// Parallel Training with Bounded Weight Inconsistency", arXiv:2606.07881; code
/// ItayElam/PACI), as read from the code (docs/schemes.md, "PACI"; its quirks in docs/schemes.md, "Quirks").
///
/// - Schedule (docs/schemes.md, "Notation and optimizers"): 1F1B with no flush between mini-batches; every stage steps
/// after every a-th
///   of its own backwards (`accumulation: a`), so the version gap a micro-batch crosses is at
///   most ceil(w_r / a) <= ceil((D-1)/a) (PACI's versions, docs/schemes.md, "Notation and optimizers"). The update is
///   the mean of the a gradients (the code divides each micro-batch's loss by a). A run's last update takes what
///   is left, so a run of n <= a micro-batches equals one flushed update of n, and a = 1 is
///   `async`.
/// - Drain (docs/schemes.md, "Notation and optimizers"): the code drains only when it switches to evaluation; pipelab
/// evaluates at
///   epoch ends, so `flush: epoch` (the default) is that drain. `flush: never` runs on.
/// - Backward (docs/schemes.md, "Notation and optimizers"): `live` (the code's default `perf` mode: the forward's
/// graph, the backward
///   reads the live weights then, docs/schemes.md, "Notation and optimizers"'s mixed-version backward, the reference's
///   F3), `stash` (the forward's weights, what bf16 autocast's saved weight copies give a Linear layer in the published
///   runs, docs/schemes.md, "Quirks") or `recompute` (the code's `mem` mode: the forward is replayed in the backward,
///   the whole stage at the backward's weights).
/// - Quirks (docs/schemes.md, "Quirks"): the code's workers drain every queued gradient before a forward, so its
///   per-stage order depends on timing; the order here is 1F1B's, the largest gap the cap
///   allows. Its stage boundaries come from timing measurements; here `partition.balance`.
#include "core/schedule/weight_copies.h"
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/stashing_policy.h"
#include "core/weights/weights.h"

namespace pipelab {
namespace {

enum class PaciBackward { Live, Stash, Recompute };

struct PaciOptions {
  FlushOption flush;
  int accumulation = 1;
  PaciBackward backward = PaciBackward::Live;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
    v("accumulation", accumulation, "a: each stage steps after every a-th of its backwards, with their mean gradient",
      InRange{1, 1e6});
    v.choice("backward", backward,
             Choices<PaciBackward>{{"live", PaciBackward::Live}, {"stash", PaciBackward::Stash},
                                   {"recompute", PaciBackward::Recompute}},
             "what a backward reads: the forward's graph at today's weights (the code's perf mode), the forward's "
             "weights, or a replayed forward at today's weights (mem mode)");
  }
};

/// 1F1B over `units` micro-batches with U only after the a-th backwards and the last one.
Schedule paci_schedule(int stages, int units, int a) {
  const Schedule full = schedules::one_f_one_b(stages, units);
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    int last_backward = -1;
    for (const Action& x : full.device(r)) {
      if (x.kind == ActionKind::Backward) last_backward = x.mb;
      if (x.kind == ActionKind::Update && (last_backward + 1) % a != 0 && last_backward + 1 != units) continue;
      s.device(r).push_back(x);
    }
  }
  return s;
}

/// The mean of the gradients accumulated since the last update, then the step.
void mean_step(Stage& stage, int& accumulated) {
  average_gradients(stage, accumulated);
  stage.step();
  accumulated = 0;
}

/// live and recompute: the live weights everywhere; recompute replays each forward.
class PaciPolicy : public StagePolicy {
 public:
  explicit PaciPolicy(bool recompute) : recompute_(recompute) {}
  bool checkpoint(int) const override { return recompute_; }
  void before_forward(Stage& stage, int mb, Message&) override { record_.forward(mb, stage.optimizer().steps()); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stage.optimizer().steps()); }
  void after_backward(Stage&, int) override { ++accumulated_; }
  void update(Stage& stage) override { mean_step(stage, accumulated_); }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  bool recompute_;
  int accumulated_ = 0;
  StalenessRecorder record_;
};

/// stash: each backward reads the weights its forward read (PipeDream's stash).
class PaciStashPolicy : public StashingPolicy {
 public:
  explicit PaciStashPolicy(Stage& stage) : StashingPolicy(stage, StashedWeights::Backward::ForwardVersion) {}
  void after_backward(Stage& stage, int mb) override {
    StashingPolicy::after_backward(stage, mb);
    ++accumulated_;
  }

 protected:
  void step(Stage& stage) override { mean_step(stage, accumulated_); }

 private:
  int accumulated_ = 0;
};

class Paci : public OneFOneBScheme<PaciOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  Schedule schedule(int stages, int units) const override {
    return paci_schedule(stages, units, options_.accumulation);
  }
  /// stash holds the versions a backward may still read: ceil(w_r / a) older ones (PACI's
  /// versions, docs/schemes.md, "Notation and optimizers") and the live one; recompute keeps each micro-batch's input
  /// only.
  StageMemory stage_memory(int stage, int stages) const override {
    const int a = options_.accumulation, w = stages - 1 - stage;
    const bool stash = options_.backward == PaciBackward::Stash;
    return {stash ? 1.0 + (w + a - 1) / a : 1.0, options_.backward == PaciBackward::Recompute};
  }
  /// stash: PipeDream's copies (core/schedule/weight_copies.h); the others read the live weights.
  WeightWorks weight_work(const std::vector<Action>& stage_actions, int stage, int stages) const override {
    if (options_.backward == PaciBackward::Stash) return stash_copies(stage_actions);
    return Scheme::weight_work(stage_actions, stage, stages);
  }
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    if (options_.backward == PaciBackward::Stash) return std::make_unique<PaciStashPolicy>(stage);
    return std::make_unique<PaciPolicy>(options_.backward == PaciBackward::Recompute);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Paci, "paci",
                 "PACI: asynchronous 1F1B without a flush, each stage stepping after every a-th backward");

}  // namespace pipelab
