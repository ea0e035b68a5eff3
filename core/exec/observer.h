#pragma once
/// Observers of a stage's actions (docs/design.md, "Observers"): what watches a run without
/// being part of its scheme — the flush-never epoch snapshots (core/records/epoch_snapshots.h)
/// and the shadow synchronous run (core/feed/shadow_sync.h). The one action interpreter
/// (core/exec/actions.cpp) notifies every observer of a stage on that stage's thread (or
/// process), right where the scheme's policy hooks run, so an observer sees the weights the
/// policy chose and cannot change which hooks of the scheme run: it is not a wrapper around
/// the policy, and a hook added to StagePolicy needs nothing here.
namespace pipelab {

class Stage;

class ActionObserver {
 public:
  virtual ~ActionObserver() = default;
  /// Before the forward of `mb` computes, after the policy chose the weights it reads
  /// (StagePolicy::before_forward). Training runs only.
  virtual void forward(Stage& /*stage*/, int /*mb*/) {}
  /// Before the backward of `mb` computes (B, or I when split), after the policy chose its
  /// weights (StagePolicy::before_backward).
  virtual void backward(Stage& /*stage*/, int /*mb*/) {}
  /// The backward of `mb` is done (after B, or W when split; after
  /// StagePolicy::after_backward): its gradient is part of the next update.
  virtual void backward_done(Stage& /*stage*/, int /*mb*/) {}
  /// Right before the policy's update (U).
  virtual void before_update(Stage& /*stage*/) {}
  /// Right after the policy's update (U).
  virtual void after_update(Stage& /*stage*/) {}
};

}  // namespace pipelab
