/// Two deliberately wrong schemes, loaded by `pipelab check`'s test as a plugin
/// (tests/tools/check_test.cpp): each passes the executor checks (its schedule is valid and
/// every executor runs it alike), and only what it declares of its numbers gives it away.
/// - `steps_each_micro_batch`: naive model parallelism over micro-batches that steps the
///   optimizer after every micro-batch, while keeping the default "synchronous" label.
/// - `older_buffer_async`: asynchronous 1F1B whose forwards read the weights before the last
///   update (a double buffer, as 2BW's) without declaring that lag (Scheme::forward_lag): its
///   gradients are a version staler than its schedule says, at every stage.
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/weights.h"

namespace wrong_schemes {
namespace {

using namespace pipelab;

struct ChunksOptions {
  int chunks = 4;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch", positive);
  }
};

class StepsEachMicroBatch : public Configured<Scheme, ChunksOptions> {
 public:
  using Configured::Configured;
  int micro_batches() const override { return options_.chunks; }
  Schedule schedule(int stages, int units) const override {
    Schedule s(stages);
    for (int r = 0; r < stages; ++r) {
      for (int mb = 0; mb < units; ++mb) {
        s.add(r, Action::F(r, mb));
        s.add(r, Action::B(r, mb));
        s.add(r, Action::U(r));  // the mistake: an update per micro-batch, not per mini-batch
      }
    }
    return s;
  }
  std::vector<int> max_in_flight(int stages) const override { return std::vector<int>(static_cast<size_t>(stages), 1); }
};

class OlderBufferPolicy : public StagePolicy {
 public:
  explicit OlderBufferPolicy(Stage& stage) : swap_(stage) {}
  void begin(Stage& stage, int) override {
    if (older_.empty()) older_ = copy_weights(stage);
  }
  void before_forward(Stage& stage, int mb, Message&) override {
    swap_.swap_in(older_);
    record_.forward(mb, stage.optimizer().steps() - (stage.optimizer().steps() > 0 ? 1 : 0));
  }
  void after_forward(Stage&, int, Message&) override { swap_.restore(); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stage.optimizer().steps()); }
  void update(Stage& stage) override {
    older_ = copy_weights(stage);  // the version before this update, read by the next forwards
    stage.step();
  }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }

 private:
  WeightSwap swap_;
  Weights older_;
  StalenessRecorder record_;
};

struct AsyncOptions {
  FlushOption flush;
  template <class V>
  void fields(V& v) {
    flush.fields(v);
  }
};

class OlderBufferAsync : public OneFOneBScheme<AsyncOptions> {
 public:
  using OneFOneBScheme::OneFOneBScheme;
  // The mistake: forward_lag() stays 0.
  std::unique_ptr<StagePolicy> make_policy(Stage& stage) const override {
    return std::make_unique<OlderBufferPolicy>(stage);
  }
};

}  // namespace
}  // namespace wrong_schemes

PIPELAB_REGISTER(pipelab::Scheme, wrong_schemes::StepsEachMicroBatch, "steps_each_micro_batch",
                 "a wrong scheme for pipelab check's test: an update per micro-batch, labelled synchronous");
PIPELAB_REGISTER(pipelab::Scheme, wrong_schemes::OlderBufferAsync, "older_buffer_async",
                 "a wrong scheme for pipelab check's test: asynchronous 1F1B whose forwards read the weights before "
                 "the last update, undeclared");
