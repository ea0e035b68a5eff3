#pragma once
/// The meaning of F, B and U on one stage, shared by every executor: the scheme's policy
/// hooks around the Stage calls, device placement, timing and loss reporting.
#include "core/exec/executor.h"

namespace pipelab {

/// Before a schedule run: train/eval mode, and the policies' begin() in training.
void begin_run(std::vector<StageSlot>& slots, int micro_batches, RunMode mode);
/// After a schedule run: the policies' end() in training (the flush).
void end_run(std::vector<StageSlot>& slots, RunMode mode);

/// F of `mb` on `slot` with input `in` (the first stage reads the feed instead). Returns
/// the message for the next stage (empty on the last stage, which reports to the feed).
Message run_forward(StageSlot& slot, int mb, Message in, Feed& feed, RunMode mode, ExecStats& stats);
/// B of `mb` with the gradient `in` from the next stage; returns dx for the previous stage.
Message run_backward(StageSlot& slot, int mb, const Message& in, ExecStats& stats);
/// U on `slot`.
void run_update(StageSlot& slot, ExecStats& stats);

}  // namespace pipelab
