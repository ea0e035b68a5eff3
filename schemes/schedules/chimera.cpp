/// Chimera's bidirectional pipelines (Li, Hoefler, "Chimera: Efficiently Training Large-Scale
/// Neural Networks with Bidirectional Pipelines", SC'21; reference code Shigangli/Chimera, branch
/// ChimeraBk; docs/schemes.md, "chimera", golden orders in docs/schemes.md, "Numbered oracles"). Two replicas of a
/// D-stage pipeline share D workers in opposite directions: the down pipeline d puts stage s on worker
/// s, the up pipeline u on worker D-1-s, so worker p holds d's stage p and u's stage D-1-p, and
/// each fills the other's bubbles. Each pipeline takes half the micro-batches in 1F1B order.
#include <fmt/format.h>

#include "core/util/error.h"
#include "schemes/schedules/modern.h"

namespace pipelab::schedules {

std::vector<int> chimera_placement(int devices) {
  // Replica 0 (d) stage s on worker s; replica 1 (u) stage s (model stage D + s) on D-1-s.
  std::vector<int> out;
  for (int s = 0; s < devices; ++s) out.push_back(s);
  for (int s = 0; s < devices; ++s) out.push_back(devices - 1 - s);
  return out;
}

Schedule chimera(int D, int n, bool doubling) {
  if (D < 2 || D % 2 != 0) {
    throw UserError(fmt::format("chimera merges its two pipelines without conflict for an even number of stages, "
                                "not {}. Fix: set partition.stages to an even number",
                                D));
  }
  const int h = D / 2;
  const int per_unit = doubling ? 2 * h : h;
  if (n < 1 || n % per_unit != 0) {
    throw UserError(fmt::format("chimera{} runs {} micro-batches per pipeline in units of {} (D/2{}), not {}. Fix: "
                                "set scheme.chunks to a multiple of {}",
                                doubling ? " (forward doubling)" : "", n, per_unit, doubling ? ", doubled" : "", n,
                                2 * per_unit));
  }
  const int units = n / per_unit, f = doubling ? 2 : 1;
  Schedule s(2 * D, D);
  s.set_replicas(2);
  for (int p = 0; p < D; ++p) {
    // The basic unit (m = D, docs/schemes.md, "chimera"): worker p < D/2 leads with the down pipeline
    // (X = d), the others with the up one.
    const bool down_first = p < h;
    const int own_d = p, own_u = D + (D - 1 - p);  // the model stages worker p holds
    const int x = down_first ? own_d : own_u, y = down_first ? own_u : own_d;
    const int x_mb = down_first ? 0 : n, y_mb = down_first ? n : 0;  // replica 1's micro-batches follow
    const int a = down_first ? h - p : p - h + 1, b = down_first ? p : D - 1 - p;
    int fx = 0, fy = 0, bx = 0, by = 0;
    const auto fwd_x = [&] {
      for (int i = 0; i < f; ++i) s.add(p, Action::F(x, x_mb + fx++));
    };
    const auto fwd_y = [&] {
      for (int i = 0; i < f; ++i) s.add(p, Action::F(y, y_mb + fy++));
    };
    const auto bwd_x = [&] { s.add(p, Action::B(x, x_mb + bx++)); };
    const auto bwd_y = [&] { s.add(p, Action::B(y, y_mb + by++)); };
    for (int u = 0; u < units; ++u) {
      // Phase 1 (a later unit's starts with the previous unit's pending backwards: concatenation and
      // doubling, docs/schemes.md, "chimera").
      for (int i = 0; i < a; ++i) {
        if (u > 0) bwd_x();
        fwd_x();
      }
      for (int i = 0; i < b; ++i) fwd_y(), fwd_x();  // phase 2
      for (int i = 0; i < a; ++i) fwd_y(), bwd_y();  // phase 3
      // Phase 4; forward doubling runs b + D/2 pairs, its doubled forwards' backwards.
      for (int i = 0; i < (doubling ? b + h : b); ++i) bwd_x(), bwd_y();
    }
    for (int i = 0; i < a; ++i) bwd_x();  // phase 5
    // Each stage steps right after its last backward (the reference code's eager all-reduce).
    auto& list = s.device(p);
    size_t last_y = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].stage == y) last_y = i;
    }
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(last_y) + 1, Action::U(y));
    list.push_back(Action::U(x));
  }
  return s;
}

}  // namespace pipelab::schedules
