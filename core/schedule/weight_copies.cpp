#include "core/schedule/weight_copies.h"

#include <algorithm>
#include <map>

#include "core/schedule/action_kinds.h"

namespace pipelab {

std::vector<double> stash_copies(const std::vector<Action>& actions) {
  std::vector<double> copies(actions.size(), 0.0);
  int updates = 0;
  std::map<int, int> forward_version;  // micro-batch -> updates made before its forward
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      ++updates;
      copies[i] = 1;
    } else if (a.kind == ActionKind::Forward) {
      forward_version[a.mb] = updates;
    } else if (kind_info(a.kind).takes_gradients) {
      const auto f = forward_version.find(a.mb);
      if (f != forward_version.end() && f->second != updates) copies[i] = kSwapCopies;
    }
  }
  return copies;
}

std::vector<double> double_buffer_copies(const std::vector<Action>& actions, int micro_batches) {
  std::vector<double> copies(actions.size(), 0.0);
  int updates = 0;
  const int m = std::max(micro_batches, 1);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      ++updates;
      copies[i] = 1;
    } else if ((a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) && a.mb >= 0) {
      const int wanted = std::max(a.mb / m - 1, 0);
      if (wanted != updates) copies[i] = kSwapCopies;
    }
  }
  return copies;
}

}  // namespace pipelab
