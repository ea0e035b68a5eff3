#include "core/schedule/lower.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/util/error.h"

namespace pipelab {
namespace {

ActionKind send_of(char p) { return p == 'F' ? ActionKind::SendF : p == 'B' ? ActionKind::SendB : ActionKind::SendH; }
ActionKind receive_of(char p) { return p == 'F' ? ActionKind::RecvF : p == 'B' ? ActionKind::RecvB : ActionKind::RecvH; }
/// The payload a compute action's result travels as when it goes back.
char back_payload(ActionKind k) { return k == ActionKind::Head ? 'H' : 'B'; }
bool consumes_gradients(ActionKind k) { return k == ActionKind::Backward || k == ActionKind::BackwardInput; }

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
  // Stage s-1 takes a gradient back when it runs a B or an I of that micro-batch.
  const auto takes_back = [&](int stage, int mb) {
    return stage >= 0 && (has(stage, ActionKind::Backward, mb) || has(stage, ActionKind::BackwardInput, mb));
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
      if (a.kind == ActionKind::Forward && how.forward && has(s - 1, ActionKind::Forward, a.mb)) {
        out.add(d, {s, ActionKind::RecvF, a.mb});
      }
      if (consumes_gradients(a.kind)) {
        std::vector<char> received;
        for (const ActionKind k : how.sends_back) {
          const char p = back_payload(k);
          if (std::find(received.begin(), received.end(), p) != received.end()) continue;
          if (!has(s + 1, k, a.mb)) continue;
          received.push_back(p);
          out.add(d, {s, receive_of(p), a.mb});
        }
      }
      out.add(d, a);
      if (a.kind == ActionKind::Forward && how.forward && has(s + 1, ActionKind::Forward, a.mb)) {
        out.add(d, {s, ActionKind::SendF, a.mb});
      }
      if (s > 0 && sends_back(a.kind) && a.kind != ActionKind::Forward && takes_back(s - 1, a.mb)) {
        out.add(d, {s, send_of(back_payload(a.kind)), a.mb});
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
