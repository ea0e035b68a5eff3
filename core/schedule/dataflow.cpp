#include "core/schedule/dataflow.h"

namespace pipelab {

WalkResult walk_schedule(const Schedule& s, const std::function<void(int, size_t)>& visit) {
  const int stages = s.stages();
  const size_t mbs = static_cast<size_t>(s.micro_batches());
  // done[r][kind][mb]: kind 0 = forward, 1 = backward.
  std::vector<std::vector<std::vector<char>>> done(
      static_cast<size_t>(stages), std::vector<std::vector<char>>(2, std::vector<char>(mbs, 0)));
  WalkResult result;
  result.next.assign(static_cast<size_t>(stages), 0);
  const auto finished = [&](int r, const Action& a) {
    return done[static_cast<size_t>(r)][a.kind == ActionKind::Forward ? 0 : 1][static_cast<size_t>(a.mb)] != 0;
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
      const auto dep = s.dependency(r, a);
      if (dep && !finished(dep->first, dep->second)) continue;
      visit(r, i);
      if (a.kind != ActionKind::Update) {
        done[static_cast<size_t>(r)][a.kind == ActionKind::Forward ? 0 : 1][static_cast<size_t>(a.mb)] = 1;
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
