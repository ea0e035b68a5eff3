#include "core/schedule/lower.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/util/error.h"

namespace pipelab {
namespace {

/// The message a compute kind's result travels back as (the kind table's; B's for a kind
/// that names none).
char back_payload(ActionKind k) {
  const ActionKindInfo& i = kind_info(k);
  return i.direction < 0 ? i.message : 'B';
}

}  // namespace

Schedule lower(const Schedule& compute, const Lowering& how) {
  PIPELAB_ASSERT(!compute.has_communication(), "lower() takes a compute-only schedule");
  std::set<std::tuple<int, char, int>> present;  // (stage, kind, mb)
  for (int d = 0; d < compute.devices(); ++d) {
    for (const Action& a : compute.device(d)) present.insert({a.stage, static_cast<char>(a.kind), a.mb});
  }
  const auto has = [&](int stage, ActionKind k, int mb) { return present.count({stage, static_cast<char>(k), mb}) > 0; };
  const auto sends_back = [&](ActionKind k) {
    return std::find(how.sends_back.begin(), how.sends_back.end(), k) != how.sends_back.end();
  };
  // Stage s-1 takes a gradient back when it runs a kind that consumes one (B, or I).
  const auto takes_back = [&](int stage, int mb) {
    if (stage < 0) return false;
    for (const ActionKindInfo& k : action_kinds()) {
      if (k.takes_gradients && has(stage, k.kind, mb)) return true;
    }
    return false;
  };
  Schedule out(compute.stages(), compute.devices());
  out.set_replicas(compute.replicas());
  out.set_collective_scope(compute.collective_scope());
  // Every added action is placed where the compute action it serves was written.
  const ScheduleSource* in_source = compute.source();
  auto where = in_source ? std::make_shared<ScheduleSource>(*in_source) : nullptr;
  for (int d = 0; d < compute.devices(); ++d) {
    if (where) where->at[static_cast<size_t>(d)].clear();
    for (size_t i = 0; i < compute.device(d).size(); ++i) {
      const Action& a = compute.device(d)[i];
      const int s = a.stage;
      const ActionKindInfo& kind = kind_info(a.kind);
      const bool goes_forward = kind.role == KindRole::Compute && kind.direction > 0;
      if (goes_forward && how.forward && has(s - 1, a.kind, a.mb)) out.add(d, {s, receive_kind(kind.message), a.mb});
      if (kind.takes_gradients) {
        std::vector<char> received;
        for (const ActionKind k : how.sends_back) {
          const char p = back_payload(k);
          if (std::find(received.begin(), received.end(), p) != received.end()) continue;
          if (!has(s + 1, k, a.mb)) continue;
          received.push_back(p);
          out.add(d, {s, receive_kind(p), a.mb});
        }
      }
      out.add(d, a);
      if (goes_forward && how.forward && has(s + 1, a.kind, a.mb)) out.add(d, {s, send_kind(kind.message), a.mb});
      if (s > 0 && sends_back(a.kind) && !goes_forward && takes_back(s - 1, a.mb)) {
        out.add(d, {s, send_kind(back_payload(a.kind)), a.mb});
      }
      if (where) {
        auto& at = where->at[static_cast<size_t>(d)];
        at.resize(out.device(d).size(), in_source->at[static_cast<size_t>(d)][i]);
      }
    }
  }
  out.set_source(where);
  return out;
}

Schedule with_communication(const Schedule& s) { return s.has_communication() ? s : lower(s); }

}  // namespace pipelab
