#pragma once
/// A schedule is data: per stage, the ordered list of actions it runs (design.md, "Schedules
/// are data"). Text form, as in torch.distributed.pipelining: `2F0` = stage 2, forward of
/// micro-batch 0; `2B0` = its backward; `2U` = an optimizer step at stage 2.
#include <optional>
#include <string>
#include <vector>

namespace pipelab {

enum class ActionKind : char { Forward = 'F', Backward = 'B', Update = 'U' };

/// One action of one stage. `mb` is -1 for an update.
struct Action {
  ActionKind kind = ActionKind::Forward;
  int mb = -1;

  static Action F(int mb) { return {ActionKind::Forward, mb}; }
  static Action B(int mb) { return {ActionKind::Backward, mb}; }
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

/// Per-stage action lists plus how backward gradients travel between stages.
class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(int stages) : stages_(static_cast<size_t>(stages)) {}

  int stages() const { return static_cast<int>(stages_.size()); }
  const std::vector<Action>& stage(int r) const { return stages_.at(static_cast<size_t>(r)); }
  std::vector<Action>& stage(int r) { return stages_.at(static_cast<size_t>(r)); }
  /// 1 + the largest micro-batch id used (0 for an empty schedule).
  int micro_batches() const;
  /// True when any stage runs a backward.
  bool has_backward() const;

  /// When true (end-to-end backprop), B(r, mb) needs the gradient from B(r+1, mb).
  /// Local gradient routes (interlocking) set it to false.
  bool backward_chain = true;

  /// The cross-stage action that must finish before stage r's action `a` can start
  /// (none for the first forward and the last stage's backward).
  std::optional<std::pair<int, Action>> dependency(int r, const Action& a) const;

  /// One line per stage: "0F0 0F1 0B1 0B0 0U".
  std::string to_text() const;
  /// Parses one or more lines of `<stage><F|B|U><mb>` tokens (any order across stages,
  /// order within a stage preserved; '#' starts a comment). Throws UserError.
  static Schedule parse(const std::string& text);

  bool operator==(const Schedule& o) const {
    return stages_ == o.stages_ && backward_chain == o.backward_chain;
  }

 private:
  std::vector<std::vector<Action>> stages_;
};

}  // namespace pipelab
