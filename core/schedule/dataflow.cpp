#include "core/schedule/dataflow.h"

#include <set>

namespace pipelab {

std::tuple<int, char, int> message_key(const Action& a) {
  const char p = payload(a.kind);
  const int to = is_send(a.kind) ? (p == 'F' ? a.stage + 1 : a.stage - 1) : a.stage;
  return {to, p, a.mb};
}

std::vector<std::vector<size_t>> all_reduce_positions(const Schedule& s) {
  std::vector<std::vector<size_t>> out(static_cast<size_t>(s.devices()));
  for (int d = 0; d < s.devices(); ++d) {
    for (size_t i = 0; i < s.device(d).size(); ++i) {
      if (s.device(d)[i].kind == ActionKind::AllReduce) out[static_cast<size_t>(d)].push_back(i);
    }
  }
  return out;
}

WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit) {
  const int devices = s.devices();
  std::set<std::tuple<int, char, int>> sent;
  const auto collectives = all_reduce_positions(s);
  std::vector<size_t> collectives_done(static_cast<size_t>(devices), 0);
  WalkResult result;
  result.next.assign(static_cast<size_t>(devices), 0);
  const auto ready = [&](int d, const Action& a) {
    if (is_receive(a.kind)) return sent.count(message_key(a)) > 0;
    if (a.kind == ActionKind::AllReduce) {
      const size_t k = collectives_done[static_cast<size_t>(d)];
      for (int q = 0; q < devices; ++q) {
        const auto& c = collectives[static_cast<size_t>(q)];
        if (k >= c.size() || result.next[static_cast<size_t>(q)] < c[k]) return false;
      }
    }
    return true;
  };
  for (;;) {
    bool progress = false;
    bool all_done = true;
    for (int d = 0; d < devices; ++d) {
      size_t& i = result.next[static_cast<size_t>(d)];
      const auto& actions = s.device(d);
      if (i >= actions.size()) continue;
      all_done = false;
      const Action& a = actions[i];
      if (!ready(d, a)) continue;
      visit(d, i);
      if (is_send(a.kind)) sent.insert(message_key(a));
      if (is_receive(a.kind)) sent.erase(message_key(a));
      if (a.kind == ActionKind::AllReduce) ++collectives_done[static_cast<size_t>(d)];
      ++i;
      progress = true;
    }
    if (all_done) {
      result.complete = true;
      return result;
    }
    if (!progress) return result;
  }
}

}  // namespace pipelab
