#include "core/schedule/generators.h"

#include <algorithm>

namespace pipelab::schedules {

Schedule naive(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    for (int j = 0; j < micro_batches; ++j) {
      s.stage(r).push_back(Action::F(j));
      s.stage(r).push_back(Action::B(j));
      s.stage(r).push_back(Action::U());
    }
  }
  return s;
}

Schedule gpipe(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    for (int i = 0; i < micro_batches; ++i) s.stage(r).push_back(Action::F(i));
    for (int i = micro_batches - 1; i >= 0; --i) s.stage(r).push_back(Action::B(i));
    if (micro_batches > 0) s.stage(r).push_back(Action::U());
  }
  return s;
}

Schedule one_f_one_b(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    const int warmup = std::min(stages - 1 - r, micro_batches);
    auto& a = s.stage(r);
    for (int j = 0; j < warmup; ++j) a.push_back(Action::F(j));
    for (int i = 0; i + warmup < micro_batches; ++i) {
      a.push_back(Action::F(warmup + i));
      a.push_back(Action::B(i));
      a.push_back(Action::U());
    }
    for (int i = std::max(0, micro_batches - warmup); i < micro_batches; ++i) {
      a.push_back(Action::B(i));
      a.push_back(Action::U());
    }
  }
  return s;
}

Schedule forward_only(int stages, int micro_batches) {
  Schedule s(stages);
  for (int r = 0; r < stages; ++r) {
    for (int i = 0; i < micro_batches; ++i) s.stage(r).push_back(Action::F(i));
  }
  return s;
}

}  // namespace pipelab::schedules
