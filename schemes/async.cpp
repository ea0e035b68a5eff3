/// `async`: 1F1B without weight stashing — the SpecTrain repository's "vanilla model parallel"
/// (columns MP2/MP4; docs/schemes.md, "async" and docs/schemes.md, "Quirks"). The forward of mini-batch j at stage r
/// reads the weights current then (w_r versions behind the update its gradient makes); the backward reads the
/// weights current at backward time, so weight gradients mix versions (the mixed-version backward,
/// docs/schemes.md, "Notation and optimizers"). Not naive model parallelism (that is `naive`).
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"

namespace pipelab {
namespace {

struct AsyncOptions {
  FlushOption flush;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
  }
};

class AsyncPolicy : public StagePolicy {
 public:
  void before_forward(Stage& stage, int mb, Message&) override { record_.forward(mb, stage.optimizer().steps()); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stage.optimizer().steps()); }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  StalenessRecorder record_;
};

class Async : public OneFOneBScheme<AsyncOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  std::unique_ptr<StagePolicy> make_policy(Stage&) const override { return std::make_unique<AsyncPolicy>(); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Async, "async", "1F1B without weight stashing (SpecTrain's vanilla model-parallel columns)");

}  // namespace pipelab
