#pragma once
/// A schedule is complete data (docs/design.md, "Schedules are data"; docs/schedules.md has the
/// grammar): per *device* (a stage thread, or a process), the ordered list of actions it runs.
/// Every action names its model stage, so a device may hold several stages (interleaved and
/// V-shaped placements), and every message between stages is an action of its own, so the
/// executors need nothing but the lists. Modelled on torch.distributed.pipelining's action IR
/// (`_Action`, its lowering pass that adds SEND/RECV, `_format_pipeline_order`), written anew.
///
/// Compute actions: `2F0` forward of micro-batch 0 on stage 2; `2B0` its whole backward;
/// `2I0` / `2W0` the backward split into the input gradient and the weight gradient (zero-bubble
/// schedules); `2H0` the stage's own auxiliary head (interlocking backprop); `2U` an optimizer step.
/// Communication actions: `2SEND_F0` / `3RECV_F0` the activation from stage 2 to 3;
/// `3SEND_B0` / `2RECV_B0` the input gradient of stage 3's B or I back to stage 2; `3SEND_H0` /
/// `2RECV_H0` stage 3's head gradient; `2ALLREDUCE` the data-parallel all-reduce, a collective of
/// every device. A backward consumes the gradients its device received for its stage and
/// micro-batch, in the order of the RECV actions; a forward with no RECV_F before it reads the
/// data feed.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/schedule/action_kinds.h"
#include "core/schedule/stage_layout.h"

namespace pipelab {

/// Where one action of a schedule file was written (1-based line and column, its length).
struct SourcePosition {
  int line = 0, column = 0, length = 0;
};

/// Where a schedule read from a file came from, so that every error about it points at the
/// user's own file:line:column and line: the file's name, its lines, and per device the
/// position of each action. lower() gives the SEND/RECV actions it adds the position of the
/// compute action they serve.
struct ScheduleSource {
  std::string file;
  std::vector<std::string> lines;
  std::vector<std::vector<SourcePosition>> at;  ///< [device][index]
  /// "file:line:col" of action `index` of device `d` ("file" when unknown).
  std::string where(int d, size_t index) const;
  /// The action's line with a caret under it (a window of long lines); "" when unknown.
  std::string quote(int d, size_t index) const;
};

/// Limits on what a schedule file may name (a bigger number is an error, before anything
/// is allocated for it).
inline constexpr int kMaxScheduleDevices = 1 << 16;
inline constexpr int kMaxScheduleStages = 1 << 16;

struct Action;
/// The stage on the other end of a SEND or RECV action: the one its `peer` names, else the
/// one neighbour rule (its message's direction in the kind table: an activation goes to
/// stage + 1, a gradient back to stage - 1; the replicas of a whole pipeline never exchange
/// messages, since each numbers its micro-batches apart); the action's own stage for any
/// other action.
int peer(const Action& a);

/// One action of one model stage. `mb` is -1 for U and ALLREDUCE. `peer` (-1: the neighbour
/// rule) names the other end of a SEND or RECV whose peer is not the neighbour: with
/// PipeDream's replicated stages a micro-batch goes to the replica of the next stage that
/// takes it (lower() sets it; the text form writes it `0SEND_F3>2`, `2RECV_F3<0`).
struct Action {
  int stage = 0;
  ActionKind kind = ActionKind::Forward;
  int mb = -1;
  int peer = -1;

  static Action F(int stage, int mb) { return {stage, ActionKind::Forward, mb}; }
  static Action B(int stage, int mb) { return {stage, ActionKind::Backward, mb}; }
  static Action I(int stage, int mb) { return {stage, ActionKind::BackwardInput, mb}; }
  static Action W(int stage, int mb) { return {stage, ActionKind::BackwardWeight, mb}; }
  static Action H(int stage, int mb) { return {stage, ActionKind::Head, mb}; }
  static Action U(int stage) { return {stage, ActionKind::Update, -1}; }
  static Action all_reduce(int stage) { return {stage, ActionKind::AllReduce, -1}; }
  bool operator==(const Action& o) const {
    return stage == o.stage && kind == o.kind && mb == o.mb && peer == o.peer;
  }
  bool operator!=(const Action& o) const { return !(*this == o); }
  /// The kind's name: "F", "SEND_B", "ALLREDUCE".
  static std::string kind_name(ActionKind k);
  /// "F3", "SEND_B0", "U", "SEND_F3>2" (without the stage).
  std::string text() const;
  /// "2F3", "1SEND_B0", "0U".
  std::string str() const;
  /// Parses "2F3"; a bad token leaves `why` non-empty (see Schedule::parse).
  static Action parse(const std::string& token, std::string& why);
};

/// Which stages an ALLREDUCE gathers (Schedule::collective_group).
enum class CollectiveScope {
  Replicas,  ///< the stage's copies in the other replicas (data parallelism)
  Model,     ///< every stage of every replica (docs/schemes.md, "Notation and optimizers": clipping, ties)
};

class Schedule {
 public:
  Schedule() = default;
  Schedule(int stages, int devices);
  /// One stage per device, device r = stage r.
  explicit Schedule(int stages) : Schedule(stages, stages) {}

  /// Model stages (1 + the largest stage any action names, or the count given). With
  /// replicas, every replica's stages, numbered as layout() says (core/schedule/stage_layout.h).
  int stages() const { return stages_; }
  /// Which copy of which pipeline stage each model stage is; the default layout (no
  /// replicas) makes every stage its own position.
  const StageLayout& layout() const { return layout_; }
  /// Declares the schedule `r` replicas of a pipeline (stages() must be a multiple of r):
  /// replica r's copy of pipeline stage p is stage r * pipeline_stages() + p.
  void set_replicas(int r);
  /// Declares the stages' layout (its stages() must equal stages()).
  void set_layout(StageLayout layout);
  /// The most copies of any pipeline stage (1 for a plain pipeline).
  int replicas() const { return layout_.max_replicas(); }
  int pipeline_stages() const { return layout_.replicated() ? static_cast<int>(layout_.counts().size()) : stages_; }
  int replica_of(int stage) const { return layout_.replica(stage); }
  int position_of(int stage) const { return layout_.position(stage); }
  /// A stage's ALLREDUCE is a collective of the stages with the same collective_group():
  /// under CollectiveScope::Replicas the copies of its pipeline stage, under
  /// CollectiveScope::Model every stage (the k-th ALLREDUCE of every stage meets: a global
  /// gradient-norm clip, tied weights).
  CollectiveScope collective_scope() const { return scope_; }
  void set_collective_scope(CollectiveScope scope) { scope_ = scope; }
  int collective_group(int stage) const { return scope_ == CollectiveScope::Model ? 0 : position_of(stage); }
  /// The layout, collective scope and replayed inputs of `o` (a transform of `o` keeps them).
  void copy_layout(const Schedule& o) {
    layout_ = o.layout_;
    scope_ = o.scope_;
    replay_ = o.replay_;
    segments_ = o.segments_;
  }

  /// Sequence segments per micro-batch (Seq1F1B, TeraPipe; core/scheme/sequence_split.h):
  /// with k > 1 the schedule's units are (micro-batch, segment) pairs, unit u being segment
  /// u % k of micro-batch u / k, and every stage must run a micro-batch's segments forward in
  /// order and backward in reverse order (validate.h). 1 (the default): whole micro-batches.
  int segments() const { return segments_; }
  void set_segments(int k) { segments_ = k; }

  /// Replayed inputs (decoupled greedy learning's replay buffers, docs/schemes.md, "dgl"). By
  /// default a stage's forward of micro-batch mb reads the activation received as mb. With
  /// replay, `reads[g][p]` names the micro-batch of stage g - 1 whose output stage g's forward
  /// of p reads: an output may be read by several forwards, or by none (its message is then
  /// dropped on arrival). Micro-batch ids are each stage's own (stage g's p-th forward is p),
  /// so stages may run different numbers of them; stage 0 reads the feed. One pipeline only
  /// (no replicas); a stage whose `reads` is empty reads as by default.
  void set_replay(std::vector<std::vector<int>> reads);
  bool replays() const { return replay_ != nullptr; }
  /// The micro-batch of stage - 1 whose received output the forward of `mb` on `stage` reads.
  int reads(int stage, int mb) const;
  /// How many forwards of `stage` read the output of micro-batch `mb` of stage - 1 (1 by default).
  int readers(int stage, int mb) const;
  /// The feed's micro-batch the forward of `mb` on `stage` stands for: the one whose input
  /// its input came from, and whose targets it trains on (`mb` by default).
  int feed_unit(int stage, int mb) const;
  /// The stages of `group`, in increasing order.
  std::vector<int> collective_stages(int group) const;
  int devices() const { return static_cast<int>(devices_.size()); }
  const std::vector<Action>& device(int d) const { return devices_.at(static_cast<size_t>(d)); }
  std::vector<Action>& device(int d) { return devices_.at(static_cast<size_t>(d)); }
  /// Appends `a` to device `d`.
  void add(int d, Action a) { device(d).push_back(a); }
  /// Per stage, the device whose list holds its actions (-1: none; validate_schedule
  /// checks that no stage is on two devices).
  std::vector<int> placement() const;
  /// 1 + the largest micro-batch id used (0 for an empty schedule).
  int micro_batches() const;
  /// True when any stage runs a backward (B, I, W or H): a training schedule.
  bool has_backward() const;
  /// True when the schedule carries its messages (SEND, RECV or ALLREDUCE actions); a
  /// schedule without them gets them from lower().
  bool has_communication() const;
  /// The schedule without its communication actions (what a reader of a schedule looks at):
  /// its compute actions, and its OFFLOADs and RELOADs.
  Schedule compute_only() const;

  /// One line per device: "d0: 0F0 0SEND_F0 0F1 ...".
  std::string to_text() const;
  /// Parses the text form: lines `d<k>: <action> ...`, or lines without `d<k>:`, where each
  /// action goes to the device numbered like its stage (one stage per device). '#' starts a
  /// comment. `source` names the text in errors ("my.sched"), which give line:column.
  /// The result remembers where each action was written (source()).
  static Schedule parse(const std::string& text, const std::string& source = "schedule");
  /// torch.distributed.pipelining's CSV form (core/schedule/torch_csv.cpp): row k lists
  /// device k's actions, one per cell (empty cells are idle steps and are skipped); both of
  /// torch's formats, compute_only and compute_comms; without any U, one per stage after its
  /// last action.
  static Schedule parse_csv(const std::string& text, const std::string& source = "schedule");
  /// torch's compute_only CSV of the compute actions (no U: torch steps outside the schedule),
  /// what `_load_csv` reads; a UserError for actions torch has no name for (H, ALLREDUCE).
  std::string to_csv() const;
  /// Where the schedule was read from (null for a generated one).
  const ScheduleSource* source() const { return source_.get(); }
  void set_source(std::shared_ptr<const ScheduleSource> source) { source_ = std::move(source); }
  /// Device `d`'s actions around `index`, the one at `index` marked, for error messages:
  ///   d1: ... 1F2 1SEND_F2 1RECV_B0 <-- HERE 1B0 ...
  std::string window(int d, size_t index, const std::string& mark = "<-- HERE") const;

  bool operator==(const Schedule& o) const {
    return stages_ == o.stages_ && layout_ == o.layout_ && devices_ == o.devices_ && segments_ == o.segments_ &&
           (replay_ == o.replay_ || (replay_ && o.replay_ && replay_->reads == o.replay_->reads));
  }

 private:
  int stages_ = 0;
  StageLayout layout_;
  CollectiveScope scope_ = CollectiveScope::Replicas;
  int segments_ = 1;
  std::vector<std::vector<Action>> devices_;
  std::shared_ptr<const ScheduleSource> source_;
  struct Replay {
    std::vector<std::vector<int>> reads, readers;  ///< per stage
  };
  std::shared_ptr<const Replay> replay_;
};

}  // namespace pipelab
