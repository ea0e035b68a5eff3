#include "core/schedule/action_kinds.h"

#include "core/util/error.h"

namespace pipelab {
namespace {

using K = ActionKind;
using R = KindRole;

constexpr ActionKindInfo compute(K kind, const char* name, char message, bool mb, bool backward, bool takes, bool frees,
                                 bool leaves, const char* cost_key, K fallback, double share = 1) {
  return {kind, name, R::Compute, message, message == 'F' ? 1 : message ? -1 : 0, mb, backward, takes, frees, leaves,
          cost_key, fallback, share};
}
constexpr ActionKindInfo link(K kind, const char* name, R role, char message) {
  return {kind, name, role, message, message == 'F' ? 1 : -1, true, false, false, false, false, nullptr, kind, 1};
}

/// OFFLOAD and RELOAD: a micro-batch's, no message; their time is the host link's.
constexpr ActionKindInfo memory(K kind, const char* name) {
  return {kind, name, R::Memory, 0, 0, true, false, false, false, false, nullptr, kind, 1};
}

// One row per kind, in enum order (checked below). The columns: kind, name, message,
// micro-batch, backward, takes gradients, frees its micro-batch, leaves a gradient, cost key,
// cost fallback (and share). I and W cost half a B each when not measured apart
// (the zero-bubble paper's B = I + W).
constexpr std::array<ActionKindInfo, kActionKindCount> kTable{{
    compute(K::Forward, "F", 'F', true, false, false, false, false, "forward", K::Forward),
    compute(K::Backward, "B", 'B', true, true, true, true, true, "backward", K::Backward),
    compute(K::BackwardInput, "I", 'B', true, true, true, false, false, "backward_input", K::Backward, 0.5),
    compute(K::BackwardWeight, "W", 0, true, true, false, true, true, "backward_weight", K::Backward, 0.5),
    compute(K::Head, "H", 'H', true, false, false, false, true, "head", K::Head),
    compute(K::Update, "U", 0, false, false, false, false, false, "update", K::Update),
    link(K::SendF, "SEND_F", R::Send, 'F'),
    link(K::RecvF, "RECV_F", R::Receive, 'F'),
    link(K::SendB, "SEND_B", R::Send, 'B'),
    link(K::RecvB, "RECV_B", R::Receive, 'B'),
    link(K::SendH, "SEND_H", R::Send, 'H'),
    link(K::RecvH, "RECV_H", R::Receive, 'H'),
    {K::AllReduce, "ALLREDUCE", R::Collective, 0, 0, false, false, false, false, true, nullptr, K::AllReduce, 1},
    memory(K::Offload, "OFFLOAD"),
    memory(K::Reload, "RELOAD"),
}};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].kind) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kTable's rows must follow ActionKind's order");

}  // namespace

const std::array<ActionKindInfo, kActionKindCount>& action_kinds() { return kTable; }

char payload(ActionKind k) {
  const ActionKindInfo& i = kind_info(k);
  return i.role == KindRole::Send || i.role == KindRole::Receive ? i.message : 0;
}
bool is_send(ActionKind k) { return kind_info(k).role == KindRole::Send; }
bool is_receive(ActionKind k) { return kind_info(k).role == KindRole::Receive; }
bool is_compute(ActionKind k) { return kind_info(k).role == KindRole::Compute; }
bool is_memory(ActionKind k) { return kind_info(k).role == KindRole::Memory; }
bool is_backward(ActionKind k) { return kind_info(k).backward; }
bool takes_micro_batch(ActionKind k) { return kind_info(k).micro_batch; }

ActionKind send_kind(char message) {
  for (const ActionKindInfo& i : kTable) {
    if (i.role == KindRole::Send && i.message == message) return i.kind;
  }
  PIPELAB_ASSERT(false, "no SEND carries a '{}' message", message);
  return K::SendF;
}

ActionKind receive_kind(char message) {
  for (const ActionKindInfo& i : kTable) {
    if (i.role == KindRole::Receive && i.message == message) return i.kind;
  }
  PIPELAB_ASSERT(false, "no RECV carries a '{}' message", message);
  return K::RecvF;
}

}  // namespace pipelab
