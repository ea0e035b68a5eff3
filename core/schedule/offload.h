#pragma once
/// The offload pass (PipeOffload, Wan et al., ICML 2025, arXiv 2503.01328): inserts, for some
/// micro-batches of some stages, an OFFLOAD after the forward (their saved activations leave
/// the device for host memory) and a RELOAD ahead of the backward that reads them. Which
/// micro-batches: PipeOffload's selective strategy, those whose activations live longest on
/// the device (the most compute actions between the forward and its backward), as many as
/// `fraction` of each offloading stage's forwards. The reload is issued `prefetch` compute
/// actions ahead of the backward so that the copy back overlaps them.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

struct OffloadPolicy {
  /// Per stage id (as the schedule numbers them): whether it offloads. A stage past the end
  /// does not.
  std::vector<bool> stages;
  /// Of each offloading stage's forwards, the share whose activations go to the host
  /// (rounded up), in (0, 1].
  double fraction = 1.0;
  /// Compute actions of the stage's device between a RELOAD and the backward it serves; a
  /// micro-batch that lives no longer than that stays on the device.
  int prefetch = 1;

  bool offloads(int stage) const {
    return stage >= 0 && static_cast<size_t>(stage) < stages.size() && stages[static_cast<size_t>(stage)];
  }
};

/// `s` with OFFLOAD and RELOAD actions inserted as `policy` says. Works on a compute program or
/// on a lowered schedule: an OFFLOAD follows its forward's sends, a RELOAD precedes the
/// receives in front of the compute action it is issued before. A forward-only schedule, and
/// a stage whose backward is not on the schedule, gain nothing.
Schedule offload(const Schedule& s, const OffloadPolicy& policy);

/// The micro-batches `offload` picks on stage `stage` of `s` (ascending).
std::vector<int> offloaded_micro_batches(const Schedule& s, const OffloadPolicy& policy, int stage);

/// Per stage of `s`, whether `offload` picks any of its micro-batches: every stage at once, in
/// one pass over the devices (asking offloaded_micro_batches stage by stage passes over every
/// device each time, which on a plan of a thousand devices took minutes).
std::vector<bool> offloading_stages(const Schedule& s, const OffloadPolicy& policy);

}  // namespace pipelab
