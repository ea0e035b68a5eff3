/// Zero-bubble schedules (Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024;
/// reference code sail-sg/zero-bubble-pipeline-parallelism, and torch.distributed.pipelining's
/// ScheduleInterleavedZeroBubble / ScheduleZBVZeroBubble). The idea: split a stage's backward into
/// I, the gradient of its input, which the stage before waits for, and W, the gradient of its
/// weights, which nothing waits for but the optimizer step. Only the I's sit on the critical
/// path, so a device may run its W's later, in the time it would otherwise wait.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <deque>

#include "core/util/error.h"
#include "schemes/schedules/modern.h"

namespace pipelab::schedules {
namespace {

void require_sizes(const char* name, int devices, int micro_batches) {
  if (devices < 1) throw UserError(fmt::format("{}: {} devices. Fix: use at least one device", name, devices));
  if (micro_batches < 1) {
    throw UserError(fmt::format("{}: {} micro-batches. Fix: use at least one", name, micro_batches));
  }
}

}  // namespace

Schedule zb_h1(int p, int m) {
  require_sizes("zb_h1", p, m);
  // The paper's ZB-H1 (Figure 3, top; torch's ScheduleInterleavedZeroBubble with one stage per
  // device): 1F1B's warm-up of p-1-d forwards, then F I pairs, and device d holds back its first
  // d weight gradients, running each later W one step behind. The postponed W's fill the tail,
  // where 1F1B's device d waits for the gradients coming back, so every device idles
  // (p-1)(F+I-W) (for W <= F and W <= I; p-1 under unit costs, a third of 1F1B's 3(p-1) with
  // whole backwards; a longer W fills only min(F, I) of each wait). The price: device
  // d holds (p-1-d) + d + 1 = p micro-batches, the most 1F1B holds on any device (on device 0),
  // so the peak over the devices does not grow. Holding only 1F1B's p-d on device d cannot reach
  // that bubble: the last device would have to run F I W strictly in turn, its I(m-1) would
  // end at (p-1)F + m(F+I+W) - W at the earliest, device 0 would end (p-1)I + W after that, and
  // the last device would idle (p-1)(F+I) in all.
  Schedule s(p, p);
  for (int d = 0; d < p; ++d) {
    const int warmup = std::min(p - 1 - d, m);
    int next_forward = 0;
    std::deque<int> weights;  // micro-batches whose I ran and W not yet
    for (; next_forward < warmup; ++next_forward) s.add(d, Action::F(d, next_forward));
    for (int i = 0; i < m; ++i) {
      if (next_forward < m) s.add(d, Action::F(d, next_forward++));
      s.add(d, Action::I(d, i));
      weights.push_back(i);
      if (i >= d) {
        s.add(d, Action::W(d, weights.front()));
        weights.pop_front();
      }
    }
    for (int j : weights) s.add(d, Action::W(d, j));
    s.add(d, Action::U(d));
  }
  return s;
}

Schedule interleaved_zero_bubble(int p, int v, int n) {
  require_sizes("zb_h1", p, n);
  // torch's ScheduleInterleavedZeroBubble (installed torch 2.15, schedules.py; docs/schedules.md
  // "Built-in schedules"): looped placement, R = max(1, floor(n/p)) rounds of n/R micro-batches
  // (PR 129597, "flexible" PP), and within a round each device walks its stages in turn. Device d runs
  // w = min((v-1) n/R + p-1-d, n v) warm-up forwards, then per step a forward, an input gradient
  // and, once d input gradients are out, the weight gradient of the oldest; the cool-down runs the
  // rest the same way. torch's idle slots ("bubbles") carry no meaning for the order (a quirk of
  // torch's, docs/schemes.md, "Quirks") and are left out.
  const int rounds = std::max(1, n / p);
  if (n % rounds != 0) {
    throw UserError(fmt::format("zb_h1 with virtual_stages: {} micro-batches on {} devices make {} rounds, which {} "
                                "does not divide (torch's rule). Fix: use a multiple of {} micro-batches, or of "
                                "{}",
                                n, p, rounds, n, rounds, p));
  }
  const int per_round = n / rounds;
  const int total = n * v;
  Schedule s(p * v, p);
  for (int d = 0; d < p; ++d) {
    const int warmup = std::min((v - 1) * per_round + p - 1 - d, total);
    std::vector<int> forwards(static_cast<size_t>(p * v), 0), inputs(static_cast<size_t>(p * v), 0);
    const auto forward = [&](int k) {
      const int stage = ((k / per_round) % v) * p + d;
      s.add(d, Action::F(stage, forwards[static_cast<size_t>(stage)]++));
    };
    std::deque<Action> weights;
    const auto input = [&](int j) {
      const int stage = (v - 1 - (j / per_round) % v) * p + d;
      const int mb = inputs[static_cast<size_t>(stage)]++;
      s.add(d, Action::I(stage, mb));
      weights.push_back(Action::W(stage, mb));
      if (j >= d) {
        s.add(d, weights.front());
        weights.pop_front();
      }
    };
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = warmup; k < total; ++k) {
      forward(k);
      input(k - warmup);
    }
    for (int j = total - warmup; j < total; ++j) input(j);
    for (const Action& w : weights) s.add(d, w);
  }
  for (int stage = 0; stage < p * v; ++stage) s.add(stage % p, Action::U(stage));
  return s;
}

Schedule zb_h2(int p, int m) {
  require_sizes("zb_h2", p, m);
  // ZB-H2 (Figure 3, bottom) lets each device hold up to 2p-1 micro-batches: device d runs
  // 2(p-1-d)+1 warm-up forwards, enough to stay busy until micro-batch 0's input gradient comes
  // back to it, and the W's drift to the tail, turning 1F1B's trapezoid into a parallelogram:
  // device d is busy without a break from time d to d + m(F+I+W) (for m >= 2p-1).
  //
  // The paper draws the schedule by hand and the authors' code searches for it with a
  // heuristic; we fix the order with one list-scheduling pass in unit time steps (F = I = W = 1):
  // at each step every device runs the first that can run of
  //   1. its next I, once the device after it has sent that gradient (I is on the critical
  //      path: the devices before it wait for it);
  //   2. its next F, once its input has arrived and it holds fewer than 2p-1 micro-batches;
  //   3. its oldest pending W (nothing but the optimizer step waits for a W, so it is the filler).
  // The resulting order is then fixed: with other costs it stays valid, only the bubble differs.
  // Warm-up, the 2p-1 bound and the W's at the tail all come out of these three rules.
  const int cap = 2 * p - 1;
  const auto unit = static_cast<size_t>(m);
  // Step at whose end the forward / input gradient of (device, micro-batch) is done.
  std::vector<std::vector<int>> forward_done(static_cast<size_t>(p), std::vector<int>(unit, INT_MAX));
  std::vector<std::vector<int>> input_done = forward_done;
  std::vector<int> next_forward(static_cast<size_t>(p), 0), next_input(static_cast<size_t>(p), 0);
  std::vector<int> held(static_cast<size_t>(p), 0);
  std::vector<std::deque<int>> weights(static_cast<size_t>(p));
  Schedule s(p, p);
  int left = 3 * m * p;
  for (int t = 0; left > 0; ++t) {
    // The greedy cannot stall for good (an F waits on the device before, an I on the device
    // after, and a device at the bound holds a pending W or waits for an I), so some device runs
    // at every step and the loop ends within 3mp steps.
    PIPELAB_ASSERT(t <= 3 * m * p, "zb_h2 list scheduling made no progress (p={}, m={})", p, m);
    for (int d = 0; d < p; ++d) {
      const auto u = static_cast<size_t>(d);
      const int i = next_input[u];
      const int f = next_forward[u];
      if (i < f && (d == p - 1 || input_done[u + 1][static_cast<size_t>(i)] <= t)) {
        s.add(d, Action::I(d, i));
        input_done[u][static_cast<size_t>(i)] = t + 1;
        weights[u].push_back(i);
        ++next_input[u];
      } else if (f < m && held[u] < cap && (d == 0 || forward_done[u - 1][static_cast<size_t>(f)] <= t)) {
        s.add(d, Action::F(d, f));
        forward_done[u][static_cast<size_t>(f)] = t + 1;
        ++held[u];
        ++next_forward[u];
      } else if (!weights[u].empty()) {
        s.add(d, Action::W(d, weights[u].front()));
        weights[u].pop_front();
        --held[u];
      } else {
        continue;
      }
      --left;
    }
  }
  for (int d = 0; d < p; ++d) s.add(d, Action::U(d));
  return s;
}

Schedule zbv(int p, int m) {
  require_sizes("zbv", p, m);
  // ZB-V (paper section 6; the hand-written order of torch's ScheduleZBVZeroBubble). Device d
  // holds stage d (the way down) and stage 2p-1-d (the way up): the turn of the V (stages p-1
  // and p) is on device p-1 and the loss (the last stage) on device 0, so a micro-batch's
  // backward starts on the device that ran its last forward, and in the steady state every
  // device runs F I W on each of its two stages per step. With F = I = W no device waits inside
  // its span once m >= 2p-1 (the tests check p <= 6). Each device holds at most 2p micro-batches
  // of half-size stages: 1F1B's memory (p full stages on device 0).
  //
  // The phases assume at least 2p-1 micro-batches; for fewer we lay out the order for 2p-1 and
  // drop the micro-batches that do not exist, which keeps it valid (a dropped micro-batch
  // removes its actions on every stage, so nothing waits for them).
  const int n = std::max(m, 2 * p - 1);
  Schedule s(2 * p, p);
  for (int d = 0; d < p; ++d) {
    const int down = d, up = 2 * p - 1 - d;
    int f_down = 0, f_up = 0, i_down = 0, i_up = 0;  // next micro-batch of each kind
    const auto add = [&](Action a) {
      if (a.mb < m) s.add(d, a);
    };
    // Warm-up: forwards of the way down, 2(p-d)-1 of them, enough to keep the device busy
    // until micro-batch 0 returns on the way up.
    for (int k = 0; k < 2 * (p - d) - 1; ++k) add(Action::F(down, f_down++));
    // Then alternate the two stages' forwards while the V fills (d pairs) ...
    for (int k = 0; k < d; ++k) {
      add(Action::F(up, f_up++));
      add(Action::F(down, f_down++));
    }
    // ... and start the way up's backwards at once, W right after I (no one to wait for yet).
    for (int k = 0; k < p - d; ++k) {
      add(Action::F(up, f_up));
      add(Action::I(up, i_up));
      add(Action::W(up, i_up));
      ++f_up, ++i_up;
    }
    // Steady state: per step one F I W on each stage, until both have run every forward.
    while (f_up < f_down || f_down < n) {
      if (f_down < n) add(Action::F(down, f_down++));
      add(Action::I(down, i_down));
      add(Action::W(down, i_down));
      ++i_down;
      add(Action::F(up, f_up));
      add(Action::I(up, i_up));
      add(Action::W(up, i_up));
      ++f_up, ++i_up;
    }
    // Cool-down: the input gradients first (devices before this one wait for them), the
    // weight gradients where a device would otherwise wait, the rest at the end.
    int w_down = i_down, w_up = i_up;
    for (int k = 0; k < d; ++k) {
      add(Action::I(down, i_down++));
      add(Action::I(up, i_up++));
    }
    for (int k = 0; k < p - d; ++k) {
      add(Action::I(down, i_down++));
      add(Action::W(down, w_down++));
    }
    while (w_up < i_up) add(Action::W(up, w_up++));
    while (w_down < i_down) add(Action::W(down, w_down++));
    PIPELAB_ASSERT(f_down == n && f_up == n && w_down == n && w_up == n, "zbv: device {} runs {} {} {} {} of {}", d,
                   f_down, f_up, w_down, w_up, n);
    s.add(d, Action::U(down));
    s.add(d, Action::U(up));
  }
  return s;
}

}  // namespace pipelab::schedules
