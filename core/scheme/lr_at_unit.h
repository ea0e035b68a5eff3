#pragma once
/// For schemes whose update applies several run units (micro-batches) at once
/// (`pipedream_2bw`, `xpipe`): the runner's LR schedule is indexed by optimizer steps, which
/// elsewhere equal run units, so such an update asks for the LR of its mini-batch's first
/// unit (the schedule's epoch position, as Megatron's iteration-based schedule places it).
#include <fmt/format.h>

#include <string>

#include "core/stage/stage.h"
#include "core/util/error.h"

namespace pipelab {

/// The factor on Stage::step's LR that makes the step use the LR of run unit `unit`.
/// `scheme` names the caller in the error for a schedule that is 0 where it is not wanted.
inline double lr_factor_at_unit(Stage& stage, int64_t unit, const std::string& scheme) {
  const double now = stage.scheduled_lr();
  const double wanted = stage.lr_at(unit);
  if (wanted == now) return 1.0;
  if (now == 0) {
    throw UserError(fmt::format(
        "scheme {}: the LR schedule is 0 at optimizer step {} but {} at step {}, so the update cannot be rescaled. "
        "Fix: use an LR schedule that is not 0 there (e.g. lr_schedule.warmup_start_factor > 0)",
        scheme, stage.optimizer().steps(), wanted, unit));
  }
  return wanted / now;
}

}  // namespace pipelab
