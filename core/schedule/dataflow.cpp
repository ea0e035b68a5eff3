#include "core/schedule/dataflow.h"

#include <array>

namespace pipelab {
namespace {

size_t kind_slot(ActionKind k) { return k == ActionKind::Forward ? 0 : k == ActionKind::Head ? 1 : 2; }

}  // namespace

std::vector<std::vector<size_t>> update_positions(const Schedule& s) {
  std::vector<std::vector<size_t>> out(static_cast<size_t>(s.stages()));
  for (int r = 0; r < s.stages(); ++r) {
    for (size_t i = 0; i < s.stage(r).size(); ++i) {
      if (s.stage(r)[i].kind == ActionKind::Update) out[static_cast<size_t>(r)].push_back(i);
    }
  }
  return out;
}

WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit) {
  const int stages = s.stages();
  const size_t mbs = static_cast<size_t>(s.micro_batches());
  // done[r][F/H/B][mb]
  std::vector<std::array<std::vector<char>, 3>> done(static_cast<size_t>(stages));
  for (auto& d : done) d.fill(std::vector<char>(mbs, 0));
  const auto updates = update_positions(s);
  std::vector<size_t> updates_done(static_cast<size_t>(stages), 0);
  WalkResult result;
  result.next.assign(static_cast<size_t>(stages), 0);
  const auto ready = [&](int r, const Action& a) {
    for (const auto& [q, dep] : s.dependencies(r, a)) {
      if (!done[static_cast<size_t>(q)][kind_slot(dep.kind)][static_cast<size_t>(dep.mb)]) return false;
    }
    if (a.kind == ActionKind::Update && s.links.synchronized_updates) {
      // Barrier: every stage is at (or past) its k-th update.
      const size_t k = updates_done[static_cast<size_t>(r)];
      for (int q = 0; q < stages; ++q) {
        const auto& u = updates[static_cast<size_t>(q)];
        if (k >= u.size() || result.next[static_cast<size_t>(q)] < u[k]) return false;
      }
    }
    return true;
  };
  for (;;) {
    bool progress = false;
    bool all_done = true;
    for (int r = 0; r < stages; ++r) {
      size_t& i = result.next[static_cast<size_t>(r)];
      const auto& actions = s.stage(r);
      if (i >= actions.size()) continue;
      all_done = false;
      const Action& a = actions[i];
      if (!ready(r, a)) continue;
      visit(r, i);
      if (a.kind == ActionKind::Update) {
        ++updates_done[static_cast<size_t>(r)];
      } else {
        done[static_cast<size_t>(r)][kind_slot(a.kind)][static_cast<size_t>(a.mb)] = 1;
      }
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
