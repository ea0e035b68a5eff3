#pragma once
/// Checks a schedule before it runs (docs/design.md): per-stage order, completeness, placement,
/// messages, no deadlock across devices, bounded in-flight micro-batches.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

struct ValidateOptions {
  /// Per stage, the most micro-batches that may be between F and B (or W) at once (empty:
  /// no bound).
  std::vector<int> max_in_flight;
};

/// Throws UserError describing the first problem found, with the device, the action's index
/// and a window of that device's actions, the culprit marked:
/// - an action with a bad stage or micro-batch id, a repeated action, a backward before its
///   F, an I without its W (or the reverse), a B and an I of one micro-batch;
/// - a stage on two devices; a forward without backward in a training schedule;
/// - gradients left unapplied (a training stage whose last action is not U);
/// - a send before what it sends, a receive after what needs it, a message sent or received
///   twice, a send nobody receives (or the reverse), a stage that receives the input of
///   some micro-batches but not of all;
/// - devices with different numbers of ALLREDUCE;
/// - a deadlock (names the action each device is stuck on);
/// - more in-flight micro-batches than allowed.
/// A schedule without communication is checked as lower() completes it.
void validate_schedule(const Schedule& s, const ValidateOptions& options = {});

}  // namespace pipelab
