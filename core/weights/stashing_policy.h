#pragma once
/// The hooks every weight-stashing scheme shares (PipeDream, SOSP'19 section 3.3, and the schemes
/// built on its stash): each forward and backward reads the version StashedWeights chooses,
/// the staleness it saw is recorded, and after each update the new live version is stashed.
/// A scheme supplies its update in step() and may extend any hook.
#include "core/scheme/one_f_one_b.h"
#include "core/scheme/staleness.h"
#include "core/weights/stashed_weights.h"

namespace pipelab {

class StashingPolicy : public StagePolicy {
 public:
  StashingPolicy(Stage& stage, StashedWeights::Backward mode)
      : stash_(stage, warmup(stage.index(), stage.count()), mode) {}

  void before_forward(Stage&, int mb, Message&) override { record_.forward(mb, stash_.before_forward(mb)); }
  void after_forward(Stage&, int, Message&) override { stash_.after_forward(); }
  void before_backward(Stage& stage, int mb) override { record_.backward(stage, mb, stash_.before_backward(mb)); }
  void after_backward(Stage&, int mb) override { stash_.after_backward(mb); }
  void update(Stage& stage) override {
    step(stage);
    stash_.after_update();
    record_.add(stage, "stored_versions", static_cast<double>(stash_.stored()));
  }
  void end(Stage&) override { stash_.flush(); }
  void collect(std::vector<StageMetric>& out) override { record_.collect(out); }
  c10::IValue state() const override { return stash_.state(); }
  void load_state(Stage&, const c10::IValue& s) override { stash_.load_state(s); }

 protected:
  /// The optimizer step of an update (the default: one step with the scheduled LR).
  virtual void step(Stage& stage) { stage.step(); }

  StashedWeights stash_;
  StalenessRecorder record_;
};

}  // namespace pipelab
