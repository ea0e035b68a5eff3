#pragma once
/// A schedule is data: per stage, the ordered list of actions it runs (docs/design.md, "Schedules
/// are data"). Text form, as in torch.distributed.pipelining: `2F0` = stage 2, forward of
/// micro-batch 0; `2B0` = its backward; `2H0` = its own auxiliary head's backward
/// (interlocking backprop); `2U` = an optimizer step at stage 2. The links say which
/// actions send messages to which neighbour, so every executor runs every scheme unchanged.
#include <optional>
#include <string>
#include <vector>

namespace pipelab {

enum class ActionKind : char { Forward = 'F', Head = 'H', Backward = 'B', Update = 'U' };

/// One action of one stage. `mb` is -1 for an update.
struct Action {
  ActionKind kind = ActionKind::Forward;
  int mb = -1;

  static Action F(int mb) { return {ActionKind::Forward, mb}; }
  static Action B(int mb) { return {ActionKind::Backward, mb}; }
  static Action H(int mb) { return {ActionKind::Head, mb}; }
  static Action U() { return {ActionKind::Update, -1}; }
  bool operator==(const Action& o) const { return kind == o.kind && mb == o.mb; }
  bool operator!=(const Action& o) const { return !(*this == o); }
  /// "F3", "B0", "U".
  std::string text() const;
};

/// A reference to the i-th action of stage r.
struct ActionRef {
  int stage = 0;
  size_t index = 0;
};

/// How the stages of a schedule exchange messages.
struct Links {
  /// Pipeline: stage r's forward takes stage r-1's output. Independent: every stage takes
  /// its micro-batches from the feed and reports its own loss (data-parallel replicas).
  enum class Forward { Pipeline, Independent };
  Forward forward = Forward::Pipeline;
  /// The actions of stage r+1 whose messages stage r's backward consumes, in this order:
  /// {B} end-to-end backprop; {H} pairwise interlocking (each component sends its own
  /// head's gradient before it waits); {H, B} n-wise; {} nothing comes back (local).
  /// An action of one of these kinds at stage r > 0 sends its result to stage r-1.
  std::vector<ActionKind> backward_inputs{ActionKind::Backward};
  /// The k-th update of every stage waits until every stage has reached its k-th update
  /// (the gradients are all-reduced in between: data parallelism).
  bool synchronized_updates = false;

  bool operator==(const Links& o) const {
    return forward == o.forward && backward_inputs == o.backward_inputs && synchronized_updates == o.synchronized_updates;
  }
  /// Whether an action of `kind` at a stage r > 0 sends a message to stage r-1.
  bool sends_back(ActionKind kind) const;
};

/// Per-stage action lists plus the links between stages.
class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(int stages) : stages_(static_cast<size_t>(stages)) {}

  int stages() const { return static_cast<int>(stages_.size()); }
  const std::vector<Action>& stage(int r) const { return stages_.at(static_cast<size_t>(r)); }
  std::vector<Action>& stage(int r) { return stages_.at(static_cast<size_t>(r)); }
  /// 1 + the largest micro-batch id used (0 for an empty schedule).
  int micro_batches() const;
  /// True when any stage runs a backward (B or H): a training schedule.
  bool has_backward() const;

  Links links;

  /// The actions of other stages that must finish before stage r's action `a` can start
  /// (a synchronized update's barrier is not listed: see dataflow.h).
  std::vector<std::pair<int, Action>> dependencies(int r, const Action& a) const;

  /// One line per stage: "0F0 0F1 0B1 0B0 0U".
  std::string to_text() const;
  /// Parses one or more lines of `<stage><F|H|B|U><mb>` tokens (any order across stages,
  /// order within a stage preserved; '#' starts a comment). Throws UserError. The links
  /// keep their defaults (a pipeline with end-to-end backprop).
  static Schedule parse(const std::string& text);

  bool operator==(const Schedule& o) const { return stages_ == o.stages_ && links == o.links; }

 private:
  std::vector<std::vector<Action>> stages_;
};

}  // namespace pipelab
