#pragma once
/// The lowering pass (docs/schedules.md): turns a compute-only schedule into a complete one by
/// adding the messages between neighbouring stages as SEND/RECV actions, as
/// torch.distributed.pipelining's `_add_send_recv` does. A send goes right after the action
/// that produces it (it never blocks); a receive goes right before the action that consumes it.
/// Stages on one device still exchange their messages through SEND/RECV pairs, so every
/// executor has one way to move data.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// What travels between stages.
struct Lowering {
  /// Whether stage s's F sends its activation to stage s+1 (a pipeline); false: every
  /// stage reads the data feed itself.
  bool forward = true;
  /// The actions of stage s > 0 whose result goes back to stage s-1, in the order stage s-1's
  /// backward takes them: {B, I} end-to-end backprop; {H} pairwise interlocking; {H, B}
  /// n-wise; {} nothing comes back (local learning). A receive is added only where the
  /// sending action exists.
  std::vector<ActionKind> sends_back{ActionKind::Backward, ActionKind::BackwardInput};
};

/// `compute` (which must have no communication actions) with its messages added.
Schedule lower(const Schedule& compute, const Lowering& how = {});

/// `s` itself when it carries its communication, else lower(s).
Schedule with_communication(const Schedule& s);

}  // namespace pipelab
