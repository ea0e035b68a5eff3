#pragma once
/// Checks a schedule before it runs (docs/design.md): per-stage order, completeness, no
/// deadlock across stages, bounded in-flight micro-batches.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

struct ValidateOptions {
  /// Per stage, the most micro-batches that may be between F and B at once (empty: no bound).
  std::vector<int> max_in_flight;
};

/// Throws UserError describing the first problem found:
/// - an action with a bad micro-batch id, a repeated F or B, a B before its F;
/// - a stage whose micro-batches differ from stage 0's, or a forward without backward in a
///   training schedule (every micro-batch must complete);
/// - gradients left unapplied (a training stage that does not end with U);
/// - a cross-stage deadlock (names the actions each stage is stuck on);
/// - more in-flight micro-batches than allowed.
void validate_schedule(const Schedule& s, const ValidateOptions& options = {});

}  // namespace pipelab
