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

Schedule one_f_one_b(int stages, int micro_batches, int segments) {
  Schedule s(stages);
  const int units = micro_batches * segments;
  for (int r = 0; r < stages; ++r) {
    const int warmup = std::min(stages - 1 - r + segments - 1, units);
    auto& a = s.device(r);
    for (int j = 0; j < warmup; ++j) a.push_back(Action::F(r, j));
    for (int i = 0; i + warmup < units; ++i) {
      a.push_back(Action::F(r, warmup + i));
      a.push_back(Action::B(r, reversed_segment(i, segments)));
      a.push_back(Action::U(r));
    }
    for (int i = std::max(0, units - warmup); i < units; ++i) {
      a.push_back(Action::B(r, reversed_segment(i, segments)));
      a.push_back(Action::U(r));
    }
  }
  s.set_segments(segments);
  return s;
}

Schedule one_f_one_b_flushed(int stages, int micro_batches, int segments) {
  Schedule s = one_f_one_b(stages, micro_batches, segments);
  for (int r = 0; r < stages; ++r) {
    auto& actions = s.device(r);
    actions.erase(std::remove(actions.begin(), actions.end(), Action::U(r)), actions.end());
    actions.push_back(Action::U(r));
  }
  return s;
}

std::vector<int> round_robin_warmups(const std::vector<int>& counts) {
  int ranks = 0;
  for (const int c : counts) ranks += c;
  std::vector<int> out;
  int before = 0;  // the replicas of the stages before p
  for (const int c : counts) {
    out.push_back(std::max(0, ranks - 1 - before) / c);
    before += c;
  }
  return out;
}

Schedule one_f_one_b_round_robin(const std::vector<int>& counts, int micro_batches) {
  const StageLayout layout(counts);
  Schedule s(layout.stages(), layout.stages());
  s.set_layout(layout);
  const std::vector<int> warmups = round_robin_warmups(counts);
  for (int g = 0; g < layout.stages(); ++g) {
    const int p = layout.position(g), r = layout.replica(g), replicas = counts[static_cast<size_t>(p)];
    std::vector<int> own;  // this replica's micro-batches, in order
    for (int k = r; k < micro_batches; k += replicas) own.push_back(k);
    const int n = static_cast<int>(own.size());
    const int warmup = std::min(warmups[static_cast<size_t>(p)], n);
    auto& a = s.device(g);
    for (int j = 0; j < warmup; ++j) a.push_back(Action::F(g, own[static_cast<size_t>(j)]));
    for (int i = 0; i < n; ++i) {
      if (i + warmup < n) a.push_back(Action::F(g, own[static_cast<size_t>(i + warmup)]));
      a.push_back(Action::B(g, own[static_cast<size_t>(i)]));
      a.push_back(Action::U(g));
    }
    const int updates = (micro_batches + replicas - 1) / replicas;
    for (int i = n; i < updates; ++i) a.push_back(Action::U(g));
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
