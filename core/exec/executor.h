#pragma once
/// Executors interpret a schedule over a set of stages (docs/design.md, "Executors"). They are
/// interchangeable and numerically identical: every one of them runs each action through
/// the same functions (exec/actions.h), so results depend only on per-stage order.
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "core/device/streams.h"

#include "core/config/registry.h"
#include "core/comm/collective.h"
#include "core/comm/message.h"
#include "core/exec/observer.h"
#include "core/exec/world.h"
#include "core/nn/sequence_segment.h"
#include "core/schedule/timeline.h"
#include "core/scheme/scheme.h"
#include "core/util/memory_meter.h"

namespace pipelab {

class BoundaryCodecs;

/// A stage the executor drives, with its scheme's weight policy and gradient route. `stage`
/// is null for stages that live in another process (distributed executor).
struct StageSlot {
  Stage* stage = nullptr;
  StagePolicy* policy = nullptr;
  /// What B and H compute; null: end-to-end backprop (GradientRoute::end_to_end()).
  GradientRoute* route = nullptr;
  /// Every forward in training keeps only its input and runs again in its backward
  /// (partition.recompute, RunPlan::recomputes), whatever the policy's checkpoint() says.
  bool recompute = false;
  /// The collective its ALLREDUCE actions join (its replicas, or every stage under
  /// CollectiveScope::Model), as member `replica` of its GradientPlan. Null without one.
  std::shared_ptr<AllReduce> all_reduce;
  int replica = 0;
  /// Notified of the stage's actions in training (flush-never snapshots, the shadow run);
  /// not owned.
  std::vector<ActionObserver*> observers;
  /// Encodes what the stage sends and decodes what it receives (core/compress/compression.h);
  /// null: messages travel as they are. Shared by every slot; not owned.
  BoundaryCodecs* codecs = nullptr;
};

enum class RunMode { Train, Eval };

/// The loss side of one micro-batch, reported by the last stage.
struct MicroBatchResult {
  at::Tensor loss;     ///< scaled mean loss (0-d, detached)
  at::Tensor correct;  ///< top-1 hits
  int64_t count = 0;
  /// Targets predicted (what accuracy divides by and the test loss weighs by): count x the
  /// targets per example, or fewer where padding predicts nothing.
  int64_t predictions = 0;
  /// Evaluation with a confusion-matrix metric (DataSpec::metric): [C, C] counts, row = target,
  /// column = top-1 prediction; undefined otherwise.
  at::Tensor confusion = {};
};

/// Where micro-batch data comes from and where results go, for one schedule run.
/// Called from stage threads (input: first stage, target/on_result: last stage), so
/// implementations must be thread-safe.
class Feed {
 public:
  virtual ~Feed() = default;
  virtual at::Tensor input(int mb) = 0;
  virtual at::Tensor target(int mb) = 0;
  /// Factor on micro-batch mb's mean loss (its share of the mini-batch).
  virtual double loss_scale(int /*mb*/) { return 1.0; }
  virtual void on_result(int mb, const MicroBatchResult& result) = 0;
  /// The training-set indices of micro-batch mb's examples (int64, one per input row), for
  /// codecs with per-example state (AQ-SGD); undefined where the feed does not know them.
  /// Any stage may ask, in any process of the run.
  virtual at::Tensor example_ids(int /*mb*/) { return {}; }
  /// The part of its sequences unit mb is (core/nn/sequence_segment.h): a scheme that
  /// pipelines sequence segments feeds through a SegmentFeed; the default is whole sequences.
  virtual nn::SequenceSegment segment(int /*mb*/) { return {}; }
  /// Micro-batch mb's document layout (core/nn/document_layout.h) where its rows are ragged
  /// text, undefined otherwise. Any stage may ask, in any process of the run.
  virtual at::Tensor documents(int /*mb*/) { return {}; }
};

/// Count and total seconds of one action kind.
struct ActionTime {
  int64_t count = 0;
  double seconds = 0;
  double mean() const { return count ? seconds / static_cast<double>(count) : 0; }
};

/// One action as it ran (recorded when ExecStats::trace is on): host seconds since the
/// stats were reset and, on CUDA, the device seconds its work occupied the stage's stream
/// (after resolve_device_times; -1 before, and on CPU). Messages are received before
/// `start` and sent after `end`, so the span is the action's own work.
struct ActionRecord {
  ActionKind kind = ActionKind::Forward;
  int mb = 0;
  double start = 0, end = 0;
  double device_start = -1, device_end = -1;
  device::Mark device_start_mark, device_end_mark;
  /// Bytes of the message this action produced for another stage (F: its activation; B or
  /// I: its input gradient; H: the head's gradient); 0 when it sends nothing.
  int64_t bytes = 0;
  /// F and I only: host bytes allocated during the action and still alive at its end (an F's:
  /// what one micro-batch in flight holds until its backward; an I's: its message and the
  /// gradients it keeps for its W; MemoryMeter). 0 for other actions.
  int64_t retained_bytes = 0;
  /// How far its stage's host bytes rose above their level at the action's start, at most
  /// (temporaries, a gradient allocated; MemoryMeter::Scope::peak_rise).
  int64_t peak_rise_bytes = 0;
};

/// What an executor measured: per-kind, per-stage action times and per-edge traffic.
/// Each entry has a single writer (the stage that ran the action or sent the message).
struct ExecStats {
  /// Per compute kind (and ALLREDUCE's own part, after every member arrived), per stage;
  /// for SEND and RECV kinds, the time their codecs took (compressed boundaries only).
  PerKind<std::vector<ActionTime>> time;
  /// Per kind, per stage: the bytes its actions of that kind moved (SEND_F, SEND_B, SEND_H:
  /// the messages sent; ALLREDUCE: the gradient bytes the stage brought to the collective).
  PerKind<std::vector<int64_t>> bytes;
  /// Edge r carries stage r -> r+1 (forward) and r+1 -> r (backward: B and H messages).
  /// Empty messages are not counted.
  std::vector<int64_t> bytes_forward, bytes_backward, messages_forward, messages_backward;
  double wall_seconds = 0;
  /// Record every action (ActionRecord) in `actions[stage]`; off by default.
  bool trace = false;
  std::vector<std::vector<ActionRecord>> actions;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  /// When tracing: the host memory meter every action thread installs (MemoryMeter::Install)
  /// and every compute action runs under (its stage is the tag). Null otherwise.
  std::shared_ptr<MemoryMeter> memory;
  /// Per stage, the peak of the host bytes its actions allocated and still held, over the
  /// traced runs (read_memory_peaks; merged over processes by Executor::merge_stats).
  std::vector<int64_t> peak_activation_bytes;
  /// Per device, the peak of what its stages' actions held together (same sources).
  std::vector<int64_t> device_peak_bytes;
  /// Per device, the peak of the activations its stages' OFFLOADs held on the host.
  std::vector<int64_t> host_peak_bytes;
  /// Clears everything (the trace flag stays); a fresh meter when tracing.
  void reset(int stages);
  /// The stages the stats are sized for (0 before reset()).
  size_t stages() const { return time[ActionKind::Forward].size(); }
  /// The mean measured seconds of every compute kind per stage, for simulate_timeline.
  CostModel cost_model() const;
  /// Meters each stage's bytes also under its device in `s` (no meter: nothing).
  void meter_devices(const Schedule& s);
  /// Copies each stage's and each device's peak from the meter into peak_activation_bytes,
  /// device_peak_bytes and host_peak_bytes (no meter: kept).
  void read_memory_peaks();
  /// Fills device_start/device_end of the traced CUDA actions: seconds after the earliest
  /// mark on the same device, so stages on one GPU share one clock. Waits for the device.
  void resolve_device_times();
};

/// A registered executor (`run.executor: sequential`).
class Executor : public Component {
 public:
  static constexpr const char* kKind = "executor";
  /// Runs `schedule` (already validated; lowered here if it has no communication) over
  /// `slots` (one per stage), one device's actions at a time per device.
  virtual void run(const Schedule& schedule, std::vector<StageSlot>& slots, Feed& feed, RunMode mode) = 0;
  /// How this executor will use threads for `devices` devices, for the start of a run's log
  /// ("1 thread x 2 intra-op threads").
  virtual std::string thread_layout(int devices) const;
  ExecStats& stats() { return stats_; }

  /// The processes this executor's stages live in (core/exec/world.h): one, unless the
  /// executor is multi-process.
  virtual World& world() { return one_process_; }

 protected:
  ExecStats stats_;

 private:
  World one_process_;
};

}  // namespace pipelab
