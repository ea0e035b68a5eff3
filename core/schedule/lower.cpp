#include "core/schedule/lower.h"

#include <algorithm>
#include <map>
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
  std::map<std::pair<int, int>, int> runs;       // (position, mb) -> the stage that runs it there
  for (int d = 0; d < compute.devices(); ++d) {
    for (const Action& a : compute.device(d)) {
      present.insert({a.stage, static_cast<char>(a.kind), a.mb});
      if (a.mb >= 0) runs.insert({{compute.position_of(a.stage), a.mb}, a.stage});
    }
  }
  const auto has = [&](int stage, ActionKind k, int mb) { return present.count({stage, static_cast<char>(k), mb}) > 0; };
  // The stage one pipeline stage before or after `stage` that runs `mb` (-1: none): the
  // neighbour, or with replicated stages the replica that takes the micro-batch.
  const auto beside = [&](int stage, int step, int mb) {
    const auto it = runs.find({compute.position_of(stage) + step, mb});
    return it == runs.end() ? -1 : it->second;
  };
  const auto sends_back = [&](ActionKind k) {
    return std::find(how.sends_back.begin(), how.sends_back.end(), k) != how.sends_back.end();
  };
  // The stage before takes a gradient back when it runs a kind that consumes one (B, or I).
  const auto takes_back = [&](int stage, int mb) {
    if (stage < 0) return false;
    for (const ActionKindInfo& k : action_kinds()) {
      if (k.takes_gradients && has(stage, k.kind, mb)) return true;
    }
    return false;
  };
  // A message action to or from `other`, which names it only when it is not the neighbour.
  const auto message = [](int stage, ActionKind kind, int mb, int other, int neighbour) {
    return Action{stage, kind, mb, other == neighbour ? -1 : other};
  };
  Schedule out(compute.stages(), compute.devices());
  out.copy_layout(compute);
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
      const int before = a.mb >= 0 ? beside(s, -1, a.mb) : -1, after = a.mb >= 0 ? beside(s, 1, a.mb) : -1;
      if (goes_forward && how.forward && has(before, a.kind, a.mb)) {
        out.add(d, message(s, receive_kind(kind.message), a.mb, before, s - 1));
      }
      if (kind.takes_gradients) {
        std::vector<char> received;
        for (const ActionKind k : how.sends_back) {
          const char p = back_payload(k);
          if (std::find(received.begin(), received.end(), p) != received.end()) continue;
          if (!has(after, k, a.mb)) continue;
          received.push_back(p);
          out.add(d, message(s, receive_kind(p), a.mb, after, s + 1));
        }
      }
      out.add(d, a);
      if (goes_forward && how.forward && has(after, a.kind, a.mb)) {
        out.add(d, message(s, send_kind(kind.message), a.mb, after, s + 1));
      }
      if (before >= 0 && sends_back(a.kind) && !goes_forward && takes_back(before, a.mb)) {
        out.add(d, message(s, send_kind(back_payload(a.kind)), a.mb, before, s - 1));
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
