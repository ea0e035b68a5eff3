/// `gpipe`: GPipe fill-drain as torchgpipe implements it (docs/schemes.md, "GPipe fill-drain", docs/schemes.md,
/// "gpipe").
///
/// - Each mini-batch of N examples is split into micro-batches of ceil(N/chunks) (chunk
///   semantics, so there may be fewer than `chunks`); every stage runs F0..F(m-1), then
///   B(m-1)..B0, then one optimizer step (flush per mini-batch).
/// - Loss averaging: micro-batch i's mean loss is scaled by n_i/N (train/feeds.h), so the
///   accumulated gradient is exactly the gradient of the mean loss over the whole
///   mini-batch and GPipe equals single-device training on it (docs/schemes.md, "gpipe"), for any chunk sizes.
/// - checkpoint: micro-batch i is recomputed in backward iff i < stop, with stop = m
///   (always; the GPipe paper), m-1 (except_last; torchgpipe's default, because the last
///   micro-batch goes backward first) or 0 (never). m is the actual count, not torchgpipe's
///   configured `chunks` (docs/schemes.md, "Quirks").
/// - deferred_batch_norm: batch norm running statistics over the whole mini-batch,
///   committed once per mini-batch (torchgpipe's DeferredBatchNorm; off by default there).
/// - backward_order: forward runs each stage's backwards in micro-batch order B0..B(m-1), as
///   gpipe_test's fill-drain does (docs/schemes.md, "gpipe_test"); the gradient is the same sum in
///   another order (equal in exact arithmetic).
#include <algorithm>

#include "core/nn/batch_norm.h"
#include "core/schedule/generators.h"
#include "core/scheme/scheme.h"

namespace pipelab {
namespace {

enum class Checkpoint { Always, ExceptLast, Never };
enum class BackwardOrder { Reverse, Forward };

struct GpipeOptions {
  int chunks = 1;
  Checkpoint checkpoint = Checkpoint::ExceptLast;
  bool deferred_batch_norm = false;
  bool unbiased_running_var = true;
  BackwardOrder backward_order = BackwardOrder::Reverse;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch (torchgpipe's chunks; default 1 as there)", positive);
    v.choice("checkpoint", checkpoint,
             Choices<Checkpoint>{{"always", Checkpoint::Always},
                                 {"except_last", Checkpoint::ExceptLast},
                                 {"never", Checkpoint::Never}},
             "which micro-batches recompute their forward in backward");
    v("deferred_batch_norm", deferred_batch_norm, "batch norm running statistics over the whole mini-batch");
    v("unbiased_running_var", unbiased_running_var,
      "deferred running variance with N/(N-1) like nn.BatchNorm (false: torchgpipe's biased variance)");
    v.choice("backward_order", backward_order,
             Choices<BackwardOrder>{{"reverse", BackwardOrder::Reverse}, {"forward", BackwardOrder::Forward}},
             "backwards in reverse micro-batch order (torchgpipe) or in forward order (gpipe_test)");
  }
};

class GpipePolicy : public StagePolicy {
 public:
  explicit GpipePolicy(const GpipeOptions& o) : o_(o) {}

  void begin(Stage& stage, int micro_batches) override {
    count_ = micro_batches;
    if (o_.deferred_batch_norm) nn::for_each_batch_norm(stage.module(), [](nn::BatchNormImpl& bn) { bn.set_deferred(true); });
  }

  bool checkpoint(int mb) const override {
    const int stop = o_.checkpoint == Checkpoint::Always       ? count_
                     : o_.checkpoint == Checkpoint::ExceptLast ? count_ - 1
                                                               : 0;
    return mb < stop;
  }

  void update(Stage& stage) override {
    if (o_.deferred_batch_norm) {
      nn::for_each_batch_norm(stage.module(), [&](nn::BatchNormImpl& bn) { bn.commit(o_.unbiased_running_var); });
    }
    stage.step();
  }

  void end(Stage& stage) override {
    if (o_.deferred_batch_norm) nn::for_each_batch_norm(stage.module(), [](nn::BatchNormImpl& bn) { bn.set_deferred(false); });
  }

 private:
  GpipeOptions o_;
  int count_ = 0;
};

class Gpipe : public Configured<Scheme, GpipeOptions> {
 public:
  using Configured::Configured;
  int micro_batches() const override { return options_.chunks; }
  Schedule schedule(int stages, int units) const override {
    Schedule s = schedules::gpipe(stages, units);
    if (options_.backward_order == BackwardOrder::Forward) {
      // Each stage's list is F0..F(m-1), B(m-1)..B0, U: the B run turned around.
      for (int r = 0; r < stages; ++r) std::reverse(s.device(r).begin() + units, s.device(r).begin() + 2 * units);
    }
    return s;
  }
  /// Checkpointed micro-batches keep only their input (the last one, under except_last, all
  /// of it: the estimate errs by one micro-batch's activations there).
  StageMemory stage_memory(int, int) const override { return {1, options_.checkpoint != Checkpoint::Never}; }
  std::unique_ptr<StagePolicy> make_policy(Stage&) const override { return std::make_unique<GpipePolicy>(options_); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Gpipe, "gpipe", "GPipe fill-drain over micro-batches, with checkpointing (torchgpipe)");

}  // namespace pipelab
