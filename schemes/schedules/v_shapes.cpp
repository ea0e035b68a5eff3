/// V-Half and V-Min (Qi, Wan, Amar, Lin, "Pipeline Parallelism with Controllable Memory",
/// arXiv:2405.15362; reference code sail-sg/zero-bubble-pipeline-parallelism, `zbv_greedy.py`;
/// docs/schedules.md "Built-in schedules"; golden orders in docs/schemes.md, "Numbered oracles"). Each of the
/// p devices holds two stages in a V (chunk a = stage r, chunk b = stage 2p-1-r) and runs six
/// passes per micro-batch: F_a, F_b, B_b, B_a (the input gradients, pipelab's I), W_b, W_a.
/// The schedule is one building block per micro-batch, repeated every 6 time units (the
/// block's start times in docs/schedules.md), then squeezed greedily as the reference code
/// does (the generation rule there): W's go into idle slots, movable passes move to the
/// earliest free slot their dependencies allow without raising the peak memory, the block is
/// re-timed, and the W's are placed again, W_b before W_a. The generation uses unit costs, as
/// the reference code does for these two settings whatever was measured (a quirk,
/// docs/schemes.md, "Quirks"); only the order is kept.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <tuple>

#include "core/util/error.h"
#include "schemes/schedules/modern.h"

namespace pipelab::schedules {
namespace {

// Pass types in the reference's order: F_a, F_b, B_b, B_a, then the W lists.
constexpr int kFa = 0, kFb = 1, kBb = 2, kBa = 3, kW = 4;

/// Per device, per pass type, the time of each micro-batch's pass.
using Times = std::vector<std::vector<std::vector<int>>>;

/// The building block's start times on device r (F_a, F_b, B_b, B_a), as docs/schedules.md
/// "Built-in schedules" gives them.
std::array<int, 4> block(bool half, int p, int r) {
  if (half) {
    const int g = p % 2 == 0 ? 3 : 0;
    return {2 * r, 3 * p - r - 2, 3 * p + g + 2 * r - 1, 6 * p + g - r - 2};
  }
  const int g = p % 3 == 0 ? 2 : 0;
  return {r, 2 * p - r - 1, 2 * p + g + r, 4 * p + g - r - 1};
}

int last_time(const std::vector<std::vector<int>>& lists) {
  int t = 0;
  for (const auto& l : lists) t = l.empty() ? t : std::max(t, l.back());
  return t;
}

/// The list of the next pass in time order over `types` lists (ties: the lower type), or -1.
int next_of(const std::vector<std::vector<int>>& lists, const std::vector<size_t>& at, int types) {
  int best = -1;
  for (int t = 0; t < types; ++t) {
    if (at[t] >= lists[t].size()) continue;
    if (best < 0 || lists[t][at[t]] < lists[best][at[best]]) best = t;
  }
  return best;
}

/// Puts the W's into a device's idle slots (one pending per B so far), the rest after its last
/// pass; with `split`, W_b (list 4) and W_a (list 5) apart, W_b first when both are pending.
void put_weights(std::vector<std::vector<int>>& lists, bool split) {
  lists.resize(4);
  lists.resize(split ? 6 : 5);
  const int bound = last_time(lists);
  std::array<int, 2> pending{0, 0};
  std::vector<size_t> at(4, 0);
  int i = 0;
  for (; i <= bound; ++i) {
    const int t = next_of(lists, at, 4);
    if (t >= 0 && lists[t][at[t]] == i) {
      ++at[t];
      if (t == kBb || t == kBa) ++pending[split ? t - kBb : 0];
      continue;
    }
    for (int w = 0; w < 2; ++w) {
      if (pending[w] == 0) continue;
      lists[kW + w].push_back(i);
      --pending[w];
      break;
    }
  }
  --i;
  for (int w = 0; w < 2; ++w) {
    for (; pending[w] > 0; --pending[w]) lists[kW + w].push_back(++i);
  }
}

/// A device's peak memory, in passes: +1 per F, -1 per W; without W lists, an idle slot runs one
/// pending W.
int peak_memory(const std::vector<std::vector<int>>& lists) {
  const bool has_w = lists.size() > 4;
  const int bound = last_time(lists);
  std::vector<size_t> at(lists.size(), 0);
  int pending = 0, now = 0, peak = 0;
  for (int i = 0; i <= bound; ++i) {
    const int t = next_of(lists, at, static_cast<int>(lists.size()));
    if (t >= 0 && lists[t][at[t]] == i) {
      ++at[t];
      now += t <= kFb ? 1 : t >= kW ? -1 : 0;
      if (t == kBb || t == kBa) ++pending;
    } else if (!has_w && pending > 0) {
      --now;
      --pending;
    }
    peak = std::max(peak, now);
  }
  return peak;
}

/// One pass, ordered as the reference visits them: time, device, type, micro-batch.
struct Visit {
  int time, device, type, mb;
};

/// The next pass over every device and type (the earliest; ties as Visit orders), or none.
bool next_visit(const Times& times, const std::vector<std::vector<size_t>>& at, Visit& out) {
  bool found = false;
  for (int d = 0; d < static_cast<int>(times.size()); ++d) {
    for (int t = 0; t < static_cast<int>(times[d].size()); ++t) {
      const size_t k = at[d][t];
      if (k >= times[d][t].size()) continue;
      const Visit v{times[d][t][k], d, t, static_cast<int>(k)};
      if (!found || std::tie(v.time, v.device, v.type, v.mb) < std::tie(out.time, out.device, out.type, out.mb)) {
        out = v;
        found = true;
      }
    }
  }
  return found;
}

/// Re-times every pass as early as its dependencies and its device allow, each taking
/// cost[type] and a message between devices `message` ("squeezing"); returns the start times
/// and, per device, its passes in order.
Times eager(const Times& times, const std::vector<int>& cost, int message,
            std::vector<std::vector<std::pair<int, int>>>* order = nullptr) {
  const int p = static_cast<int>(times.size());
  std::map<std::tuple<int, int, int>, int> end;
  std::vector<std::vector<size_t>> at(static_cast<size_t>(p), std::vector<size_t>(times[0].size(), 0));
  std::vector<int> free(static_cast<size_t>(p), 0);
  std::vector<std::vector<std::pair<int, int>>> seq(static_cast<size_t>(p));
  Times start = times;
  for (Visit v; next_visit(times, at, v);) {
    ++at[v.device][v.type];
    int ready = free[v.device];
    if ((v.type == kFa || v.type == kBb) && v.device > 0) ready = std::max(ready, end.at({v.device - 1, v.type, v.mb}) + message);
    if ((v.type == kFb || v.type == kBa) && v.device + 1 < p) ready = std::max(ready, end.at({v.device + 1, v.type, v.mb}) + message);
    if (v.type > kFa && v.type < kW) ready = std::max(ready, end.at({v.device, v.type - 1, v.mb}));
    if (v.mb > 0) ready = std::max(ready, end.at({v.device, v.type, v.mb - 1}));
    const int done = ready + cost[static_cast<size_t>(v.type)];
    end[{v.device, v.type, v.mb}] = done;
    free[v.device] = done;
    start[v.device][v.type][v.mb] = ready;
    seq[v.device].push_back({v.type, v.mb});
  }
  if (order) *order = seq;
  return start;
}

/// The earliest time pass `v` may take: after what it waits for (current times).
int earliest(const Times& t, const Visit& v) {
  const int p = static_cast<int>(t.size());
  int deps = -1;
  if ((v.type == kFa || v.type == kBb) && v.device > 0) deps = std::max(deps, t[v.device - 1][v.type][v.mb]);
  if ((v.type == kFb || v.type == kBa) && v.device + 1 < p) deps = std::max(deps, t[v.device + 1][v.type][v.mb]);
  if (v.type > kFa && v.type < kW) deps = std::max(deps, t[v.device][v.type - 1][v.mb]);
  if (v.type == kW) {
    // The mb-th W waits for the mb-th B of either kind.
    std::vector<int> b = t[v.device][kBb];
    b.insert(b.end(), t[v.device][kBa].begin(), t[v.device][kBa].end());
    std::sort(b.begin(), b.end());
    deps = std::max(deps, b[static_cast<size_t>(v.mb)]);
  }
  if (v.mb > 0) deps = std::max(deps, t[v.device][v.type][v.mb - 1]);
  return deps + 1;
}

/// The generation's greedy pass (docs/schedules.md "Built-in schedules"): every movable pass, in
/// visiting order, moves to the earliest free slot after its dependencies that keeps its device
/// within the current peak memory. Fixed: the
/// passes from device 0's first B_a up to the first F_a of the last micro-batch, and without
/// W's also everything before them (only the cool-down moves).
Times reorder(Times t, bool with_weights) {
  if (with_weights) {
    for (auto& lists : t) put_weights(lists, false);
  }
  const int types = with_weights ? 5 : 4;
  for (auto& lists : t) lists.resize(static_cast<size_t>(types));
  int memory = 0;
  for (const auto& lists : t) memory = std::max(memory, peak_memory(lists));
  const int m = static_cast<int>(t[0][kFa].size());
  std::vector<std::vector<char>> taken(t.size());
  for (size_t d = 0; d < t.size(); ++d) taken[d].assign(static_cast<size_t>(last_time(t[d])) + 2, 0);
  std::vector<std::vector<size_t>> at(t.size(), std::vector<size_t>(static_cast<size_t>(types), 0));
  int phase = 0;
  for (Visit v; next_visit(t, at, v);) {
    ++at[v.device][v.type];
    int& time = t[v.device][v.type][v.mb];
    if (v.type == kBa && v.device == 0 && phase == 0) phase = 1;
    const bool fixed = phase == 1 || (phase == 0 && !with_weights);
    if (phase == 1 && v.type == kFa && v.mb == m - 1) phase = 2;
    if (!fixed) {
      const int was = time;
      bool moved = false;
      for (int slot = earliest(t, v); slot < was && !moved; ++slot) {
        if (taken[v.device][static_cast<size_t>(slot)]) continue;
        time = slot;
        moved = peak_memory(t[v.device]) <= memory;
      }
      if (!moved) time = was;
    }
    taken[v.device][static_cast<size_t>(time)] = 1;
  }
  if (!with_weights) {
    for (auto& lists : t) put_weights(lists, false);
  }
  return eager(t, std::vector<int>(5, 1), 0);
}

Schedule generate(bool half, const char* name, int p, int m) {
  if (p < 1) throw UserError(fmt::format("{}: {} devices. Fix: use at least one device", name, p));
  if (m < 1) throw UserError(fmt::format("{}: {} micro-batches. Fix: use at least one", name, m));
  // The generation (docs/schedules.md), step 1: micro-batch i's pass of type t at offset_t + 6i.
  Times t(static_cast<size_t>(p), std::vector<std::vector<int>>(4));
  for (int r = 0; r < p; ++r) {
    const std::array<int, 4> offset = block(half, p, r);
    for (int type = 0; type < 4; ++type) {
      for (int i = 0; i < m; ++i) t[r][type].push_back(offset[type] + 6 * i);
    }
  }
  Times first = reorder(t, true);
  for (auto& lists : first) lists.resize(4);
  Times second = reorder(first, false);
  for (auto& lists : second) {
    lists.resize(4);
    put_weights(lists, true);
  }
  std::vector<std::vector<std::pair<int, int>>> order;
  eager(second, std::vector<int>(6, 1000), 1, &order);
  Schedule s(2 * p, p);
  for (int r = 0; r < p; ++r) {
    const int a = r, b = 2 * p - 1 - r;
    for (const auto& [type, mb] : order[static_cast<size_t>(r)]) {
      switch (type) {
        case kFa: s.add(r, Action::F(a, mb)); break;
        case kFb: s.add(r, Action::F(b, mb)); break;
        case kBb: s.add(r, Action::I(b, mb)); break;
        case kBa: s.add(r, Action::I(a, mb)); break;
        case kW: s.add(r, Action::W(b, mb)); break;
        default: s.add(r, Action::W(a, mb)); break;
      }
    }
    s.add(r, Action::U(a));
    s.add(r, Action::U(b));
  }
  return s;
}

/// The generation re-counts a device's peak for every slot a pass tries, seconds for 32
/// devices and 32 micro-batches, and the planner asks for the same order again for every
/// stage it tries recomputing: each (shape, devices, micro-batches) is generated once per
/// process and copied after.
Schedule v_shaped(bool half, const char* name, int p, int m) {
  static std::mutex mutex;
  static std::map<std::tuple<bool, int, int>, Schedule> made;
  const std::tuple<bool, int, int> key{half, p, m};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = made.find(key);
    if (it != made.end()) return it->second;
  }
  Schedule s = generate(half, name, p, m);
  const std::lock_guard<std::mutex> lock(mutex);
  made.emplace(key, s);
  return s;
}

}  // namespace

Schedule v_half(int devices, int micro_batches) { return v_shaped(true, "v_half", devices, micro_batches); }
Schedule v_min(int devices, int micro_batches) { return v_shaped(false, "v_min", devices, micro_batches); }

}  // namespace pipelab::schedules
