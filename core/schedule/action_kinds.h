#pragma once
/// The action kinds of a schedule, as one table (docs/design.md, "One table of action kinds"). Everything
/// the core knows about a kind that is not its behaviour lives in its row: its name in
/// schedule text, whether it computes, sends, receives or meets the other stages, the
/// message it carries or produces and which way that message goes, whether it takes a
/// micro-batch, and the key of its measured time and cost. Parsing, printing, lowering,
/// the neighbour rule, the executors' statistics, the timeline's cost model and the
/// simulator's stage costs all read the table; what a kind *does* is its handler in
/// core/exec/actions.cpp, and the rules on its order are core/schedule/validate.cpp's.
///
/// Adding a kind: a value in the enum below, its row in action_kinds.cpp, its handler, its
/// validator rule (docs/adding-a-scheme.md, "Adding an action kind").
#include <array>
#include <cstddef>
#include <cstdint>

namespace pipelab {

/// In table order: ActionKind k is row static_cast<size_t>(k).
enum class ActionKind : uint8_t {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  Head,
  Update,
  SendF,
  RecvF,
  SendB,
  RecvB,
  SendH,
  RecvH,
  AllReduce,
  Offload,
  Reload,
};
inline constexpr size_t kActionKindCount = 15;

/// What a device spends an action on.
enum class KindRole : uint8_t {
  Compute,     ///< F, B, I, W, H, U: work on the stage's own tensors
  Send,        ///< hands a message to a neighbour stage
  Receive,     ///< takes a message from a neighbour stage
  Collective,  ///< meets other stages (ALLREDUCE): every member waits for all
  /// Moves what a stage keeps for a micro-batch's backward between the device and host
  /// memory (OFFLOAD after its F, RELOAD before its backward: PipeOffload, arXiv 2503.01328).
  Memory,
};

/// One row of the table.
struct ActionKindInfo {
  ActionKind kind;
  /// Its name in schedule text ("F", "SEND_B", "ALLREDUCE").
  const char* name;
  KindRole role;
  /// The message: for SEND/RECV the one they carry, for a compute kind the one it produces
  /// for a neighbour ('F' an activation, 'B' an input gradient, 'H' a head's gradient); 0
  /// when there is none.
  char message;
  /// Where that message goes: +1 to the next stage (activations), -1 to the previous one
  /// (gradients); 0 without a message. The one neighbour rule, peer(), reads it.
  int direction;
  /// Takes a micro-batch number ("F3"); U and ALLREDUCE do not ("U").
  bool micro_batch;
  /// Part of a backward (B, I or W).
  bool backward;
  /// Consumes the gradients received for its micro-batch (B, or I when the backward is
  /// split): the RECV_B and RECV_H of that micro-batch come before it.
  bool takes_gradients;
  /// Ends its micro-batch's stay in memory (B, or W when split): what an F saved is freed.
  bool frees_micro_batch;
  /// Leaves a gradient for the next U to apply (B, W, H; an ALLREDUCE's sum).
  bool leaves_gradient;
  /// The key of its measured seconds and its cost ("forward", "backward_input"); null for
  /// kinds whose time is not their own (SEND/RECV: the links'; ALLREDUCE: the collective's).
  const char* cost_key;
  /// A kind with no cost of its own given falls back to `cost_share` of this kind's (I and
  /// W are the two halves of a B); itself when there is no fallback.
  ActionKind cost_fallback;
  double cost_share;
};

/// The table, in enum order.
const std::array<ActionKindInfo, kActionKindCount>& action_kinds();
inline const ActionKindInfo& kind_info(ActionKind k) { return action_kinds()[static_cast<size_t>(k)]; }

char payload(ActionKind k);
bool is_send(ActionKind k);
bool is_receive(ActionKind k);
/// F, B, I, W, H, U: what a device spends compute on.
bool is_compute(ActionKind k);
/// OFFLOAD, RELOAD.
bool is_memory(ActionKind k);
/// B, I or W.
bool is_backward(ActionKind k);
bool takes_micro_batch(ActionKind k);
/// The SEND or RECV kind that carries `message` ('F', 'B' or 'H').
ActionKind send_kind(char message);
ActionKind receive_kind(char message);

/// One value per action kind (per-kind statistics, costs), indexed by the kind.
template <class T>
struct PerKind {
  std::array<T, kActionKindCount> values{};
  T& operator[](ActionKind k) { return values[static_cast<size_t>(k)]; }
  const T& operator[](ActionKind k) const { return values[static_cast<size_t>(k)]; }
  auto begin() { return values.begin(); }
  auto end() { return values.end(); }
  auto begin() const { return values.begin(); }
  auto end() const { return values.end(); }
};

}  // namespace pipelab
