#include "schemes/dgl_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "core/util/error.h"

namespace pipelab::dgl {
namespace {

/// A double in [0, 1) from 53 bits of the engine: written out so that the sequence is the
/// same under every standard library (std::uniform_real_distribution's is not specified).
double unit_draw(std::mt19937_64& engine) { return static_cast<double>(engine() >> 11) * 0x1.0p-53; }

/// Module k's pick weight: 1, or 1 - slowdown for the slowed module.
int weighted_pick(const ReplayRule& rule, int stages, std::mt19937_64& engine) {
  std::vector<double> weight(static_cast<size_t>(stages), 1.0);
  if (rule.slow_stage >= 0 && rule.slow_stage < stages)
    weight[static_cast<size_t>(rule.slow_stage)] = 1 - rule.slowdown;
  double total = 0;
  for (const double w : weight) total += w;
  double u = unit_draw(engine) * total;
  for (int k = 0; k < stages; ++k) {
    u -= weight[static_cast<size_t>(k)];
    if (u < 0) return k;
  }
  return stages - 1;  // rounding at the top end
}

void check_list(const ReplayRule& rule, int stages) {
  if (rule.picks.empty())
    throw UserError("scheme dgl: order: list needs `picks`. Fix: list the modules to pick, e.g. picks: [0, 1]");
  for (const int k : rule.picks) {
    if (k < 0 || k >= stages) {
      throw UserError(
          fmt::format("scheme dgl: picks names module {}, but there are {} stages (0..{}). Fix: pick "
                      "modules 0..{}",
                      k, stages, stages - 1, stages - 1));
    }
  }
  if (std::find(rule.picks.begin(), rule.picks.end(), 0) == rule.picks.end()) {
    throw UserError(
        "scheme dgl: picks never names module 0, so no mini-batch would enter the pipeline. Fix: add 0 "
        "to picks");
  }
}

}  // namespace

std::vector<int> pick_sequence(const ReplayRule& rule, int stages, int units) {
  if (rule.order == Order::List) check_list(rule, stages);
  std::vector<int> out;
  int entered = 0;  // mini-batches module 0 has taken
  // Appends pick k; false once it would be module 0's (units + 1)-th, which ends the epoch.
  const auto add = [&](int k) {
    if (k == 0 && entered == units) return false;
    entered += k == 0;
    out.push_back(k);
    return true;
  };
  if (rule.order == Order::List) {
    for (size_t i = 0;; ++i) {
      if (!add(rule.picks[i % rule.picks.size()])) return out;
    }
  }
  // The reference's fill: every module twice in order, so each buffer holds two entries.
  for (int k = 0; k < stages; ++k) {
    if (!add(k) || !add(k)) return out;
  }
  std::mt19937_64 engine(static_cast<uint64_t>(rule.seed));
  for (int i = 0;; ++i) {
    const int k = rule.order == Order::RoundRobin ? i % stages : weighted_pick(rule, stages, engine);
    if (!add(k)) return out;
  }
}

void RingBuffer::push(int mb) {
  slots_[next_] = {mb, 0};
  next_ = (next_ + 1) % slots_.size();
}

int RingBuffer::take() {
  const size_t m = slots_.size();
  long best = -1;
  // Recency of slot i: larger is fresher. The write pointer is the oldest entry of a full
  // ring, so (i - next) mod m orders the ring oldest to freshest; the reference code
  // computes it with ">" where "≥" belongs, making slot `next` the freshest (docs/schemes.md, "Quirks").
  const auto recency = [&](size_t i) {
    if (ranking_ == Ranking::Reference) return i > next_ ? i - next_ : i + m - next_;
    return (i + m - next_) % m;
  };
  for (size_t i = 0; i < m; ++i) {
    const Slot& s = slots_[i];
    if (s.mb < 0 || (max_reuse_ > 0 && s.uses >= max_reuse_)) continue;
    if (best < 0) {
      best = static_cast<long>(i);
      continue;
    }
    const Slot& b = slots_[static_cast<size_t>(best)];
    if (s.uses < b.uses || (s.uses == b.uses && recency(i) > recency(static_cast<size_t>(best)))) {
      best = static_cast<long>(i);
    }
  }
  if (best < 0) return -1;
  Slot& chosen = slots_[static_cast<size_t>(best)];
  ++chosen.uses;
  return chosen.mb;
}

Schedule replay_schedule(const ReplayRule& rule, int stages, const std::vector<int>& picks) {
  Schedule s(stages);
  std::vector<RingBuffer> buffers(static_cast<size_t>(std::max(stages - 1, 0)),
                                  RingBuffer(rule.buffer, rule.ranking, rule.max_reuse));
  std::vector<std::vector<int>> reads(static_cast<size_t>(stages));
  std::vector<int> runs(static_cast<size_t>(stages), 0);  // forwards so far, per stage
  for (const int k : picks) {
    const size_t g = static_cast<size_t>(k);
    int source = -1;
    if (k > 0) {
      source = buffers[g - 1].take();
      if (source < 0) continue;  // nothing to read: the pick is skipped, as in the reference
    }
    const int mb = runs[g]++;
    if (k > 0) reads[g].push_back(source);
    s.add(k, Action::F(k, mb));
    if (k + 1 < stages) {
      // Every output goes to the next stage as it is made; that stage keeps the ones some
      // forward of it reads (Schedule::readers) until their last reader.
      s.add(k, {k, ActionKind::SendF, mb});
      s.add(k + 1, {k + 1, ActionKind::RecvF, mb});
      buffers[g].push(mb);
    }
    s.add(k, Action::B(k, mb));
    s.add(k, Action::U(k));
  }
  s.set_replay(std::move(reads));
  return s;
}

}  // namespace pipelab::dgl
