#pragma once
/// The meaning of F, H, B and U on one stage, shared by every executor: the scheme's policy
/// hooks around the Stage calls, device placement, timing and loss reporting.
#include "core/exec/executor.h"
#include "core/exec/transport.h"

namespace pipelab {

/// Before a schedule run: train/eval mode, and the policies' begin() in training.
void begin_run(std::vector<StageSlot>& slots, int micro_batches, RunMode mode);
/// After a schedule run: the policies' end() in training (the flush).
void end_run(std::vector<StageSlot>& slots, RunMode mode);

/// Adds a message sent from stage `from` to stage `to` (neighbours) to the traffic figures.
void count_message(ExecStats& stats, int from, int to, const Message& m);

/// F of `mb` on `slot` with input `in`; a first stage (or any stage under independent
/// forward links, `from_feed`) reads the feed instead. Returns the message for the next
/// stage (empty from a stage with the loss, which reports to the feed).
Message run_forward(StageSlot& slot, int mb, Message in, bool from_feed, Feed& feed, RunMode mode, ExecStats& stats);
/// H of `mb`: the stage's own head; returns its message for the previous stage.
Message run_head(StageSlot& slot, int mb, ExecStats& stats);
/// B of `mb` with the messages `in` from the next stage (Links::backward_inputs order);
/// returns the message for the previous stage.
Message run_backward(StageSlot& slot, int mb, const std::vector<Message>& in, ExecStats& stats);
/// U on `slot`.
void run_update(StageSlot& slot, ExecStats& stats);

/// Action `a` of stage `r` of `s`: receives what it consumes through `transport`, runs it
/// with the functions above, sends what it produces (and counts the traffic). Every
/// executor runs every action through this one function, so they agree on the numbers.
void run_action(const Schedule& s, int r, const Action& a, StageSlot& slot, Feed& feed, RunMode mode,
                Transport& transport, ExecStats& stats);

}  // namespace pipelab
