#include "core/schedule/update_gaps.h"

#include <algorithm>
#include <map>

namespace pipelab {

std::vector<int> update_gaps(const Schedule& s) {
  std::vector<int> most(static_cast<size_t>(std::max(0, s.stages())), 0);
  for (int d = 0; d < s.devices(); ++d) {
    std::map<int, int> updates;                   // stage -> its updates so far on this device
    std::map<std::pair<int, int>, int> at_forward;  // (stage, mb) -> its stage's updates at the forward
    for (const Action& a : s.device(d)) {
      if (a.stage < 0 || a.stage >= s.stages()) continue;
      if (a.kind == ActionKind::Update) ++updates[a.stage];
      if (a.kind == ActionKind::Forward) at_forward[{a.stage, a.mb}] = updates[a.stage];
      const auto it = at_forward.find({a.stage, a.mb});
      if (!kind_info(a.kind).takes_gradients || it == at_forward.end()) continue;
      int& m = most[static_cast<size_t>(a.stage)];
      m = std::max(m, updates[a.stage] - it->second);
      at_forward.erase(it);
    }
  }
  return most;
}

}  // namespace pipelab
