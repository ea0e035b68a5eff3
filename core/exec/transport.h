#pragma once
/// How messages travel between stages, for the executors that share exec/actions.h's
/// run_action: a map in one thread (sequential), blocking mailboxes between device threads
/// (threaded), c10d point-to-point between processes (distributed).
#include <stdexcept>

#include "core/device/streams.h"
#include "core/comm/message.h"
#include "core/schedule/schedule.h"

namespace pipelab {

/// A message in transit, with what the receiver's stream must wait for (CUDA; null on CPU).
struct Parcel {
  Message message;
  device::Ready ready;
};

class Transport {
 public:
  virtual ~Transport() = default;
  /// Delivers `p`, stage `from`'s message with payload `kind` ('F' activation, 'B' input
  /// gradient, 'H' head gradient) of micro-batch `mb`, to neighbour `to` (a SEND action).
  /// Never blocks on the receiver (the schedule, not the transport, bounds what is in
  /// flight).
  virtual void send(int from, int to, char kind, int mb, Parcel p) = 0;
  /// The message stage `from` sent to stage `to` with (`kind`, `mb`) (a RECV action); waits
  /// for it.
  virtual Parcel receive(int to, int from, char kind, int mb) = 0;
  /// A device joining round k of collective group `group` (Schedule::collective_group) at
  /// its first ALLREDUCE of the round (core/schedule/dataflow.h, collective_arrivals):
  /// returns once all `members` devices of the group have joined it.
  virtual void collective_barrier(int group, int members) = 0;
};

/// Thrown inside a stage that was waiting when another stage failed: the executor stops
/// every stage and reports the first failure, not this.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled because another stage failed") {}
};

}  // namespace pipelab
