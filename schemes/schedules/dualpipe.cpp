/// DualPipeV: DeepSeek's DualPipe (DeepSeek-V3 Technical Report, section 3.2.1; github.com/deepseek-ai/
/// DualPipe) folded into a V ("cut in half"), as torch.distributed.pipelining's ScheduleDualPipeV
/// lays it out. DualPipe feeds micro-batches from both ends of a pipeline whose devices hold two
/// copies of the stages; cutting it in half leaves p devices with two stages each in a V (stage d
/// and stage 2p-1-d on device d) and one stream of micro-batches, which is ZB-V's placement.
///
/// What makes it DualPipe is its steady state: each step pairs the forward of one of the
/// device's stages with the backward of the other, which DualPipe runs overlapped (one's
/// communication hidden behind the other's compute). Our devices run the pair one after the
/// other (F, then B); the IR has no overlapped action, so the gain of the overlap is not
/// modelled, but the order is the reference one.
#include <fmt/format.h>

#include <deque>
#include <utility>

#include "core/util/error.h"
#include "schemes/schedules/modern.h"

namespace pipelab::schedules {

Schedule dualpipe_v(int p, int m) {
  if (p < 1) throw UserError(fmt::format("dualpipe_v: {} devices. Fix: use at least one device", p));
  // The phases below run m - 2p + d + 1 steady steps on device d: with fewer than 2p
  // micro-batches the last device would have none and the warm-up would ask for micro-batches
  // that do not exist (torch raises the same).
  if (m < 2 * p) {
    throw UserError(fmt::format(
        "dualpipe_v needs at least as many micro-batches as stages (2 x {} devices = {}), got {}. Fix: use {} or "
        "more micro-batches",
        p, 2 * p, m, 2 * p));
  }
  Schedule s(2 * p, p);
  for (int d = 0; d < p; ++d) {
    const int down = d, up = 2 * p - 1 - d;
    // Next micro-batch of each stage's forward and backward (B or I).
    int f_down = 0, f_up = 0, b_down = 0, b_up = 0;
    std::deque<std::pair<int, int>> weights;  // (stage, micro-batch) whose I ran, W pending
    const auto forward = [&](int stage) { s.add(d, Action::F(stage, stage == down ? f_down++ : f_up++)); };
    const auto backward = [&](int stage, bool split) {
      const int mb = stage == down ? b_down++ : b_up++;
      if (!split) {
        s.add(d, Action::B(stage, mb));
        return;
      }
      s.add(d, Action::I(stage, mb));
      weights.emplace_back(stage, mb);
    };
    const auto weight = [&] {
      if (weights.empty()) return;
      s.add(d, Action::W(weights.front().first, weights.front().second));
      weights.pop_front();
    };
    // 1. Forwards of the way down only: micro-batch 0 comes back to device d, on the way up,
    //    2(p-1-d) forward times after it left.
    for (int k = 0; k < 2 * (p - 1 - d); ++k) forward(down);
    // 2. Both legs' forwards in turn, once the way up's first micro-batches reach the device.
    for (int k = 0; k < d + 1; ++k) {
      forward(down);
      forward(up);
    }
    // 3. Start the way up's backwards, split, the W at once (the device has nothing else to
    //    wait on yet), and keep its forwards coming.
    for (int k = 0; k < p - 1 - d; ++k) {
      backward(up, true);
      weight();
      forward(up);
    }
    // 4. The steady state, DualPipe's overlapped pairs: F(down) with B(up), F(up) with B(down).
    //    (torch leaves the very first pair of the last device unoverlapped; run one after the
    //    other, as here, the two are the same.)
    for (int k = 0; k < m - 2 * p + d + 1; ++k) {
      forward(down);
      backward(up, false);
      forward(up);
      backward(down, false);
    }
    // 5. The way down has run all its forwards: the way up's remaining ones, each paired with
    //    a backward of the way down, a backward of the way up before each pair.
    for (int k = 0; k < p - 1 - d; ++k) {
      backward(up, false);
      forward(up);
      backward(down, false);
    }
    // 6. Backwards of both legs in turn. Halfway through, switch to split backwards, so that
    //    the W's can fill the waits of the cool-down (the zero-bubble trick); odd devices switch
    //    before the way up's backward, even ones between the two.
    bool split = false;
    for (int k = 0; k < d + 1; ++k) {
      if (k == (d + 1) / 2 && d % 2 == 1) split = true;
      backward(up, split);
      if (k == (d + 1) / 2 && d % 2 == 0) split = true;
      backward(down, split);
    }
    // 7. The way down's last backwards, each after a pending W.
    for (int k = 0; k < p - 1 - d; ++k) {
      weight();
      backward(down, true);
    }
    // 8. The remaining W's.
    while (!weights.empty()) weight();
    PIPELAB_ASSERT(f_down == m && f_up == m && b_down == m && b_up == m, "dualpipe_v: device {} runs {} {} {} {} of {}",
                   d, f_down, f_up, b_down, b_up, m);
    s.add(d, Action::U(down));
    s.add(d, Action::U(up));
  }
  return s;
}

}  // namespace pipelab::schedules
