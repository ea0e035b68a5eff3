#pragma once
/// How stale a schedule makes a stage's gradients: between a micro-batch's forward on a stage
/// and its first backward there (B, or I), the updates that stage makes on its device. A
/// gradient whose forward read the live weights is that many versions old when it is applied
/// (PipeDream's 1F1B: D - 1 - s at stage s; 0 for a schedule flushed before each update).
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// Per stage id of `s`, the most updates between one of its micro-batches' forward and its
/// first backward.
std::vector<int> update_gaps(const Schedule& s);

}  // namespace pipelab
