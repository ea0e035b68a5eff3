#pragma once
/// A scheme over replicas of its pipeline (`partition.replicas`, core/schedule/replicate.h):
/// the schedule, placement and validation rules of R copies of a scheme's S-stage pipeline.
/// Every caller that asks a scheme for these (the runner, describe, simulate, schedule)
/// asks here, so a scheme never sees its replicas and every scheme takes them.
#include <vector>

#include "core/scheme/scheme.h"

namespace pipelab {

/// The schedule of `stages` pipeline stages over units.size() replicas, replica r running
/// units[r] micro-batches (0: it only joins the all-reduces). One replica: the scheme's own
/// schedule, untouched.
Schedule replicated_schedule(const Scheme& scheme, int stages, const std::vector<int>& units);

/// `replicas` replicas of `units` micro-batches each (for tools that name a count, not a
/// mini-batch).
std::vector<int> equal_units(int units, int replicas);

/// The device of each of the stages * replicas stages: replica r's stage p sits on device
/// r * D + placement(p), D the devices of one replica.
std::vector<int> replicated_placement(const Scheme& scheme, int stages, int replicas);

/// The scheme's schedule rules for its replicated schedule: ALLREDUCE allowed, the bounds
/// repeated for every replica.
ValidateOptions replicated_rules(const Scheme& scheme, int stages, int replicas);

/// Why `scheme` cannot run `replicas` replicas ("" when it can). Replicas split each
/// mini-batch, so a scheme whose schedule spans several mini-batches (asynchronous weights,
/// Span::Epoch or Span::Run) would need its staleness per replica defined: refused for now.
std::string replicas_refused(const Scheme& scheme, int replicas);

}  // namespace pipelab
