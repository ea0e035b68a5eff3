#pragma once
/// Checks a schedule before it runs (docs/design.md): per-stage order, completeness, placement,
/// messages, no deadlock across devices, bounded in-flight micro-batches, and the scheme's
/// own rules (which action kinds it runs, how micro-batches cover the data).
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// How a training schedule's micro-batches cover the mini-batch (or an epoch's units).
enum class Coverage {
  Any,         ///< not checked
  /// A pipeline: every stage runs F of every micro-batch 0..M-1, once; with replicas
  /// (Schedule::replicas), every stage of exactly one replica.
  EveryStage,
};

struct ValidateOptions {
  /// Per stage, the most micro-batches that may be between F and B (or W) at once (empty:
  /// no bound).
  std::vector<int> max_in_flight;
  /// The compute kinds the scheme runs (empty: any). ALLREDUCE needs replicas and H an
  /// auxiliary head, so a scheme without them leaves them out.
  std::vector<ActionKind> kinds;
  /// The schedule must train: a forward-only one is refused.
  bool training = false;
  Coverage coverage = Coverage::Any;
  /// Every training stage steps exactly once, at its end (synchronous weights).
  bool one_update = false;
};

/// Throws UserError describing the first problem found, with a fix. A schedule read from a
/// file (Schedule::source) is reported at the action's file:line:column with its line quoted;
/// others with the device, the action's index and a window of that device's actions.
/// - an action with a bad stage or micro-batch id, of a kind the scheme does not run, a
///   repeated action, a backward before its F, an I without its W (or the reverse), a B and
///   an I of one micro-batch, an update with no gradient since the last one;
/// - a device or a stage without actions; a stage on two devices; a forward without backward
///   in a training schedule; a micro-batch some stage skips (Coverage);
/// - gradients left unapplied (a training stage whose last action is not U);
/// - a send before what it sends, a receive after what needs it, a message sent or received
///   twice, a send nobody receives (or the reverse), a stage that receives the input of
///   some micro-batches but not of all;
/// - an OFFLOAD before its F or after its backward, a RELOAD with no OFFLOAD before it, a
///   backward before the RELOAD of its offloaded activations, one never reloaded, either in a
///   forward-only schedule;
/// - devices with different numbers of ALLREDUCE;
/// - a deadlock (names the action each device is stuck on);
/// - more in-flight micro-batches than allowed.
/// A schedule without communication is checked as lower() completes it. Cost: O(n log n)
/// in the number n of actions.
void validate_schedule(const Schedule& s, const ValidateOptions& options = {});

}  // namespace pipelab
