#include "core/schedule/replicate.h"

#include "core/util/error.h"

namespace pipelab {

Schedule replicate(const std::vector<Schedule>& per_replica) {
  PIPELAB_ASSERT(!per_replica.empty(), "replicate() needs at least one replica");
  if (per_replica.size() == 1) return per_replica.front();
  // Replayed inputs name micro-batches by each stage's own numbers, which replicas renumber.
  for (const Schedule& s : per_replica) PIPELAB_ASSERT(!s.replays(), "replicas of a schedule with replayed inputs");
  const int replicas = static_cast<int>(per_replica.size());
  const int stages = per_replica.front().stages(), devices = per_replica.front().devices();
  Schedule out(stages * replicas, devices * replicas);
  // Replica r's units follow r - 1's whole micro-batches, so u / k still names a micro-batch.
  out.set_segments(per_replica.front().segments());
  int first_mb = 0;
  for (int r = 0; r < replicas; ++r) {
    const Schedule& s = per_replica[static_cast<size_t>(r)];
    PIPELAB_ASSERT(s.stages() == stages && s.devices() == devices,
                   "replica {} has {} stages on {} devices, replica 0 {} on {}", r, s.stages(), s.devices(), stages,
                   devices);
    PIPELAB_ASSERT(s.replicas() == 1, "replica {} is itself replicated", r);
    for (int d = 0; d < devices; ++d) {
      for (Action a : s.device(d)) {
        a.stage += r * stages;
        if (a.mb >= 0) a.mb += first_mb;
        if (a.kind == ActionKind::Update) out.add(r * devices + d, Action::all_reduce(a.stage));
        out.add(r * devices + d, a);
      }
    }
    first_mb += s.micro_batches();
  }
  out.set_replicas(replicas);
  return out;
}

Schedule synchronize_updates(const Schedule& s, CollectiveScope scope) {
  Schedule out(s.stages(), s.devices());
  out.copy_layout(s);
  out.set_collective_scope(scope);
  for (int d = 0; d < s.devices(); ++d) {
    const std::vector<Action>& actions = s.device(d);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const bool synced = i > 0 && actions[i - 1] == Action::all_reduce(a.stage);
      if (a.kind == ActionKind::Update && !synced) out.add(d, Action::all_reduce(a.stage));
      out.add(d, a);
    }
  }
  return out;
}

Schedule updates_only(const Schedule& s) {
  Schedule out(s.stages(), s.devices());
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (a.kind == ActionKind::Update) out.add(d, a);
    }
  }
  return out;
}

}  // namespace pipelab
