#pragma once
/// The discrete-event replay behind the timeline (timeline.h) and `pipelab simulate`
/// (tools/simulate): every device runs its actions in order; a compute action takes its
/// duration; a message occupies the link from its sender's device to its receiver's device
/// (first in, first out: a link has one sender, so its order is that device's program order)
/// for `wire` seconds and arrives `latency` later; a RECV waits for its message; the k-th
/// ALLREDUCE starts once the devices of every replica of its stage are free and takes `collective`;
/// an OFFLOAD or RELOAD copies on its device's link to the host (`host`).
/// Messages between stages on the same device cost nothing.
#include <functional>
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

struct EventCosts {
  /// Seconds of compute action `a` on device `d`.
  std::function<double(int d, const Action& a)> compute;
  /// Seconds the message of SEND `a` occupies its link (bytes / bandwidth); none: 0.
  std::function<double(const Action& a)> wire;
  /// Seconds from leaving the link to arriving (the link's latency); none: 0.
  std::function<double(const Action& a)> latency;
  /// Seconds of an ALLREDUCE `a` (a collective of the replicas of its stage); none: 0.
  std::function<double(const Action& a)> collective;
  /// Seconds the copy of an OFFLOAD or RELOAD `a` occupies its device's link to the host
  /// (latency included); none: 0. The link carries one copy at a time each way, beside
  /// compute; a RELOAD's copy starts after its OFFLOAD's has ended, and the backward that
  /// reads what it brings back waits for it.
  std::function<double(const Action& a)> host;
  /// Compute and communication overlap (a send costs its device nothing; the link works on
  /// its own). Off: the sending device waits until its message has left and arrived.
  bool overlap = true;
  /// All devices share one worker that runs the actions in the dataflow walk's order: what
  /// the sequential executor does, so a replay of its measured costs predicts its step.
  bool one_worker = false;
};

/// One action placed in time on its device.
struct TimedAction {
  Action action;
  double start = 0, end = 0;
};

/// A message on a link.
struct TimedTransfer {
  Action send;  ///< the SEND action
  int from = 0, to = 0;  ///< devices
  double start = 0, end = 0;  ///< on the link (end = arrival)
};

struct EventTimeline {
  /// Per device, its actions in time (compute, communication and collectives).
  std::vector<std::vector<TimedAction>> devices;
  std::vector<TimedTransfer> transfers;
  /// The copies of OFFLOAD and RELOAD actions on their device's link to the host (`send` is
  /// the OFFLOAD or RELOAD; from = to = its device).
  std::vector<TimedTransfer> copies;
  double makespan = 0;
};

/// Replays `s` (it must carry its communication and be deadlock-free).
EventTimeline replay(const Schedule& s, const EventCosts& costs);

}  // namespace pipelab
