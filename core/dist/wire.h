#pragma once
/// Messages over a process group: a fixed-size int64 header (which tensors, their dtypes
/// and shapes, the policy tag) followed by one send per tensor, each under its own tag so
/// that the receiver can take messages in its own order. Tensors travel through host
/// memory (Gloo); the receiver moves them to its device.
#include "core/dist/process_group.h"
#include "core/exec/message.h"

namespace pipelab::dist {

/// The tag of part `part` (0: header, 1..: tensors) of the message with payload `kind`
/// ('F', 'B', 'H') of micro-batch `mb` (below 2^19) for stage `to`. Unique per sender-receiver
/// pair within a schedule run: two stages of one process could share tags only if they were a
/// multiple of 16 apart and heard from the same process (an interleaved placement over more
/// than 16 processes).
int message_tag(char kind, int mb, int to, int part);

void send_message(ProcessGroup& group, const Message& m, int dst, char kind, int mb, int to);
Message receive_message(ProcessGroup& group, int src, char kind, int mb, int to);

}  // namespace pipelab::dist
