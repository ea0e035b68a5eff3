/// The schedule-aware cut (tools/plan/cut_search.h).
#include "tools/plan/cut_search.h"

#include "tools/plan/candidates.h"

namespace pipelab::plan {

int64_t CutSearch::improve(Candidate& c) const {
  if (!space.repartition || c.stages < 2 || !c.simulated) return 0;
  const auto over_time = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > space.time_limit;
  };
  int64_t replays = 0;
  for (bool moved = true; moved && !over_time();) {
    moved = false;
    Candidate best = c;
    for (size_t i = 0; i + 1 < c.balance.size() && !over_time(); ++i) {
      for (const int from : {0, 1}) {
        // One block across cut i: from stage i to i + 1, or back.
        const size_t give = i + static_cast<size_t>(from), take = i + 1 - static_cast<size_t>(from);
        if (c.balance[give] < 2) continue;
        Candidate trial = c;
        --trial.balance[give];
        ++trial.balance[take];
        ++replays;
        if (!replay(trial, e, space, costs_of, options)) continue;
        const bool fits = space.memory_cap <= 0 || trial.peak <= space.memory_cap;
        if (fits && trial.step < best.step * (1 - 1e-9)) best = trial;
      }
    }
    if (best.step < c.step) {
      c = best;
      c.searched_cut = true;
      moved = true;
    }
  }
  return replays;
}

}  // namespace pipelab::plan
