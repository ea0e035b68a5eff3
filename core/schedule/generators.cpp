#include "core/schedule/generators.h"

#include <algorithm>

namespace pipelab::schedules {

Schedule naive(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    for (int j = 0; j < micro_batches; ++j) {
      s.device(r).push_back(Action::F(r, j));
      s.device(r).push_back(Action::B(r, j));
      s.device(r).push_back(Action::U(r));
    }
  }
  return s;
}

Schedule gpipe(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    for (int i = 0; i < micro_batches; ++i) s.device(r).push_back(Action::F(r, i));
    for (int i = micro_batches - 1; i >= 0; --i) s.device(r).push_back(Action::B(r, i));
    if (micro_batches > 0) s.device(r).push_back(Action::U(r));
  }
  return s;
}

Schedule one_f_one_b(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    const int warmup = std::min(stages - 1 - r, micro_batches);
    auto& a = s.device(r);
    for (int j = 0; j < warmup; ++j) a.push_back(Action::F(r, j));
    for (int i = 0; i + warmup < micro_batches; ++i) {
      a.push_back(Action::F(r, warmup + i));
      a.push_back(Action::B(r, i));
      a.push_back(Action::U(r));
    }
    for (int i = std::max(0, micro_batches - warmup); i < micro_batches; ++i) {
      a.push_back(Action::B(r, i));
      a.push_back(Action::U(r));
    }
  }
  return s;
}

Schedule forward_only(int stages, int micro_batches, const std::vector<int>& placement) {
  int devices = stages;
  if (!placement.empty()) devices = *std::max_element(placement.begin(), placement.end()) + 1;
  Schedule s(stages, devices);
  for (int r = 0; r < stages; ++r) {
    const int d = placement.empty() ? r : placement[static_cast<size_t>(r)];
    for (int i = 0; i < micro_batches; ++i) s.device(d).push_back(Action::F(r, i));
  }
  return s;
}

}  // namespace pipelab::schedules
