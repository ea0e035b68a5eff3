#pragma once
/// How messages travel between stages, for the executors that share exec/actions.h's
/// run_action: a map in one thread (sequential), blocking mailboxes between stage threads
/// (threaded), c10d point-to-point between processes (distributed).
#include <stdexcept>

#include "core/device/streams.h"
#include "core/exec/message.h"
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
  /// Delivers `m`, the result of action `kind` of micro-batch `mb` at stage `from`, to
  /// neighbour `to`. Never blocks on the receiver (the schedule, not the transport,
  /// bounds what is in flight).
  virtual void send(int from, int to, ActionKind kind, int mb, Parcel p) = 0;
  /// The message stage `from` sent to stage `to` for (`kind`, `mb`); waits for it.
  virtual Parcel receive(int to, int from, ActionKind kind, int mb) = 0;
  /// Called by stage `stage` before its k-th update when the schedule synchronizes
  /// updates: returns once every stage has reached its k-th update.
  virtual void update_barrier(int stage) = 0;
};

/// Thrown inside a stage that was waiting when another stage failed: the executor stops
/// every stage and reports the first failure, not this.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled because another stage failed") {}
};

}  // namespace pipelab
