#pragma once
/// The policy wrapper of `flush: never` runs (core/train/runner_flushless.cpp), in a header of
/// its own so that tests can hold it to the whole StagePolicy interface.
#include <string>
#include <vector>

#include "core/scheme/scheme.h"

namespace pipelab {

/// Wraps a scheme's policy for one flushless run: everything goes to the scheme's policy, and
/// after the update that applies the gradient of an epoch's last micro-batch, the stage's
/// weights are saved as "the model after that epoch".
///
/// Why every hook is overridden here: the executors call only the policy, so wrapping it is
/// the one way to act on the stage's own thread right after its update; but a hook this class
/// did not override would not fail, it would silently run StagePolicy's default instead of
/// the scheme's (a scheme's gradient route, head or all-reduce would be lost under
/// `flush: never`, as happened once). So this class overrides all of them, final, and
/// tests/schemes/flushless_hooks_test.cpp compares the hooks declared in
/// core/scheme/scheme.h with the overrides below: a hook added to StagePolicy and not
/// forwarded here fails that test.
class EpochSnapshot final : public StagePolicy {
 public:
  /// Snapshots go to `folder`; an epoch is `per_epoch` micro-batches (run units).
  EpochSnapshot(StagePolicy& inner, std::string folder, int64_t per_epoch);

  void begin(Stage& s, int micro_batches) override { inner_.begin(s, micro_batches); }
  bool checkpoint(int mb) const override { return inner_.checkpoint(mb); }
  void before_forward(Stage& s, int mb, Message& in) override { inner_.before_forward(s, mb, in); }
  void after_forward(Stage& s, int mb, Message& out) override { inner_.after_forward(s, mb, out); }
  void before_backward(Stage& s, int mb) override { inner_.before_backward(s, mb); }
  Message backward(Stage& s, int mb, const std::vector<Message>& in) override { return inner_.backward(s, mb, in); }
  Message backward_input(Stage& s, int mb, const std::vector<Message>& in) override {
    return inner_.backward_input(s, mb, in);
  }
  void backward_weight(Stage& s, int mb) override { inner_.backward_weight(s, mb); }
  void after_backward(Stage& s, int mb) override;
  Message head(Stage& s, int mb) override { return inner_.head(s, mb); }
  void update(Stage& s) override;
  void end(Stage& s) override { inner_.end(s); }
  void collect(std::vector<StageMetric>& out) override { inner_.collect(out); }
  c10::IValue state() const override { return inner_.state(); }
  void load_state(Stage& s, const c10::IValue& state) override { inner_.load_state(s, state); }

  /// Where stage `stage`'s weights after epoch `epoch` (1-based) are saved.
  static std::string path(const std::string& folder, int64_t epoch, int stage);

 private:
  StagePolicy& inner_;
  std::string folder_;
  int64_t per_epoch_;
  /// Epochs whose last micro-batch finished its backward here since the last update.
  std::vector<int64_t> finished_;
};

}  // namespace pipelab
