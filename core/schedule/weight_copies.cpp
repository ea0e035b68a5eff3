#include "core/schedule/weight_copies.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/schedule/action_kinds.h"

namespace pipelab {

WeightWorks as_copies(const std::vector<double>& copies) {
  WeightWorks out;
  for (double c : copies) out.push_back({c, 0});
  return out;
}

WeightWorks stash_copies(const std::vector<Action>& actions) {
  WeightWorks work(actions.size());
  int updates = 0;
  std::map<int, int> forward_version;  // micro-batch -> updates made before its forward
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      ++updates;
      work[i].copies = 1;
    } else if (a.kind == ActionKind::Forward) {
      forward_version[a.mb] = updates;
    } else if (kind_info(a.kind).takes_gradients) {
      const auto f = forward_version.find(a.mb);
      if (f != forward_version.end() && f->second != updates) work[i].copies = kSwapCopies;
    }
  }
  return work;
}

WeightWorks double_buffer_copies(const std::vector<Action>& actions, int micro_batches) {
  WeightWorks work(actions.size());
  int updates = 0;
  const int m = std::max(micro_batches, 1);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::Update) {
      ++updates;
      work[i].copies = 1;
    } else if ((a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) && a.mb >= 0) {
      const int wanted = std::max(a.mb / m - 1, 0);
      if (wanted != updates) work[i].copies = kSwapCopies;
    }
  }
  return work;
}

WeightWork predicted_swap(int updates) {
  return updates == 0 ? WeightWork{1 + kSwapCopies, 0} : WeightWork{kSwapCopies, 1};
}

WeightWorks predicted_swaps(const std::vector<Action>& actions, const Predicting& p) {
  WeightWorks work(actions.size());
  int updates = 0;
  int meter_target = -1;  // the version the open measurement waits for; -1: none open
  std::set<int> stashed;  // micro-batches whose forward's prediction waits for their backward
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    const bool predicts_now = !p.from_first_update || updates > 0;
    if (a.kind == ActionKind::Update) {
      ++updates;
      if (meter_target >= 0 && updates >= meter_target) {
        work[i].copies = 1 + 2 * kDistanceCopies;
        meter_target = -1;
      }
    } else if (a.kind == ActionKind::Forward && p.forward_steps > 0 && predicts_now) {
      work[i] = predicted_swap(updates);
      // The meter measures nothing before the first update (PredictionMeter::start).
      if (p.measured && updates > 0 && meter_target < 0) {
        work[i].copies += 2;
        meter_target = updates + p.forward_steps;
      }
      if (p.stash_for_backward) stashed.insert(a.mb);
    } else if (kind_info(a.kind).takes_gradients) {
      if (p.stash_for_backward) {
        if (stashed.erase(a.mb) > 0) work[i].copies = kSwapCopies;
      } else if (p.backward_steps > 0 && predicts_now) {
        work[i] = predicted_swap(updates);
      }
    }
  }
  return work;
}

}  // namespace pipelab
