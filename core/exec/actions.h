#pragma once
/// The meaning of every action of a schedule on one device, shared by every executor: the
/// scheme's policy hooks around the Stage calls, messages through a Transport, device
/// placement, timing and loss reporting.
#include <map>
#include <set>
#include <tuple>

#include "core/exec/executor.h"
#include "core/exec/transport.h"

namespace pipelab {

/// The micro-batches a stage of a schedule runs: `count` numbers from `first`, `stride`
/// apart (with replicas of whole pipelines, core/schedule/replicate.h, replica r's stages
/// start after replica r-1's micro-batches; a replicated stage, PipeDream's, takes every
/// R-th micro-batch).
struct ReplicaMicroBatches {
  int first = 0;
  int count = 0;
  int stride = 1;
  /// The stage's own number of schedule micro-batch `mb` (0, 1, 2, ...).
  int own(int mb) const { return (mb - first) / stride; }
};
/// Per stage of `s`.
std::vector<ReplicaMicroBatches> replica_micro_batches(const Schedule& s);

/// Before a run of `s`: train/eval mode, and the policies' begin() in training (with the
/// micro-batches of the stage's own replica).
void begin_run(std::vector<StageSlot>& slots, const Schedule& s, RunMode mode);
/// After a schedule run: the policies' end() in training (the flush).
void end_run(std::vector<StageSlot>& slots, RunMode mode);

/// Adds a message sent from stage `from` to stage `to` to the traffic figures: forward (an
/// activation) or back (a gradient), on the edge of the stage on the boundary's near side
/// (the sender of an activation, the receiver of a gradient).
void count_message(ExecStats& stats, int from, int to, bool forward, const Message& m);

/// What one device keeps between its actions during one schedule run: results waiting for
/// their SEND, and messages received and not yet used. Used by that device's thread only.
class DeviceWork {
 public:
  /// For device `device` of the complete schedule `s`, whose collective groups span
  /// `group_devices` devices each (core/schedule/dataflow.h, collective_devices).
  DeviceWork(const Schedule& s, int device, const std::map<int, int>& group_devices);
  const Schedule& schedule() const { return s_; }
  int device() const { return device_; }

  /// Keeps the result of (stage, payload, mb) if a SEND of this device will send it;
  /// returns the bytes kept (0 when nothing will be sent).
  int64_t produced(int stage, char kind, int mb, Message m);
  Message take_result(int stage, char kind, int mb);
  /// A received activation (RECV_F) or gradient (RECV_B, RECV_H; kept in arrival order).
  void received(int stage, char kind, int mb, Message m);
  /// The activation received for (stage, mb), if any: `has_input` tells.
  bool has_input(int stage, int mb) const { return inputs_.count({stage, mb}) > 0; }
  /// The schedule offloads (stage, mb)'s activations: its forward keeps them where OFFLOAD
  /// can move them.
  bool offloads(int stage, int mb) const { return offloads_.count({stage, mb}) > 0; }
  Message take_input(int stage, int mb);
  std::vector<Message> take_gradients(int stage, int mb);
  /// `stage`'s own number of the schedule's micro-batch `mb` (its replica counts from 0).
  int own_micro_batch(int stage, int mb) const { return own_.at(static_cast<size_t>(stage)).own(mb); }
  /// Results and messages never used (0 after a complete run).
  size_t pending() const { return results_.size() + inputs_.size() + gradients_.size(); }
  /// Whether action `index` (an ALLREDUCE) is where this device joins its round, bringing
  /// all its stages of the group (core/schedule/dataflow.h, collective_arrivals).
  bool joins_collective(size_t index) const { return joins_.at(index); }
  /// This device's stages in collective group `group`, and the devices the group spans.
  const std::vector<int>& collective_stages_here(int group) const { return here_.at(group); }
  int collective_devices(int group) const { return devices_.at(group); }

 private:
  const Schedule& s_;
  int device_;
  std::vector<ReplicaMicroBatches> own_;
  std::set<std::tuple<int, char, int>> sends_;
  std::set<std::pair<int, int>> offloads_;  ///< (stage, mb) of this device's OFFLOADs
  std::map<std::tuple<int, char, int>, Message> results_;
  /// A received activation and the forwards still to read it (more than one: replayed).
  struct Input {
    Message message;
    int readers = 1;
  };
  std::map<std::pair<int, int>, Input> inputs_;
  std::map<std::pair<int, int>, std::vector<Message>> gradients_;
  std::vector<bool> joins_;
  std::map<int, std::vector<int>> here_;
  std::map<int, int> devices_;
};

/// The work of every device of `s`, for one run (what depends on the whole schedule is
/// computed once here, not per device).
std::vector<DeviceWork> device_work(const Schedule& s);

/// Action `index` of `work`'s device, on `slot` (the slot of the action's stage): receives
/// or sends through `transport`, or runs the compute with the policy's hooks. Every executor
/// runs every action through this one function, so they agree on the numbers. An internal
/// or LibTorch error inside it is rethrown with the device's actions around it, the failing
/// one marked `<-- ERROR HERE` (as torch.distributed.pipelining reports a failed action).
void run_action(size_t index, DeviceWork& work, StageSlot& slot, Feed& feed, RunMode mode, Transport& transport,
                ExecStats& stats);

}  // namespace pipelab
