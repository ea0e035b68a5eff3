/// Looped placements: interleaved 1F1B and the looped BFS. Both place stage s on device s % p, so
/// a micro-batch loops v times over the p devices; they differ in the order a device runs its
/// stages' work (depth-first in groups of p micro-batches, or breadth-first over all of them).
#include <fmt/format.h>

#include <algorithm>

#include "core/util/error.h"
#include "core/schedule/generators.h"
#include "schemes/schedules/modern.h"

namespace pipelab::schedules {
namespace {

void require_sizes(const char* name, int devices, int virtual_stages, int micro_batches) {
  if (devices < 1) {
    throw UserError(fmt::format("{}: {} devices. Fix: use at least one device", name, devices));
  }
  if (virtual_stages < 1) {
    throw UserError(fmt::format("{}: {} stages per device. Fix: use at least one", name, virtual_stages));
  }
  if (micro_batches < 1) {
    throw UserError(fmt::format("{}: {} micro-batches. Fix: use at least one", name, micro_batches));
  }
}

/// One U per stage at the end of its device's list: the synchronous flush of the mini-batch.
void add_updates(Schedule& s, const std::vector<int>& placement) {
  for (int stage = 0; stage < static_cast<int>(placement.size()); ++stage) {
    s.add(placement[static_cast<size_t>(stage)], Action::U(stage));
  }
}

}  // namespace

std::vector<int> looped_placement(int devices, int virtual_stages) {
  std::vector<int> out(static_cast<size_t>(std::max(devices * virtual_stages, 0)));
  for (size_t s = 0; s < out.size(); ++s) out[s] = static_cast<int>(s) % devices;
  return out;
}

std::vector<int> v_placement(int devices) {
  // Down the devices and back up (torch's generate_stage_to_rank_mapping(style="v")): the first
  // and last stages share device 0, so the loss is computed where the data enters.
  std::vector<int> out(static_cast<size_t>(std::max(2 * devices, 0)));
  for (int s = 0; s < 2 * devices; ++s) out[static_cast<size_t>(s)] = s < devices ? s : 2 * devices - 1 - s;
  return out;
}

Schedule interleaved_1f1b(int p, int v, int m, int segments) {
  require_sizes("interleaved_1f1b", p, v, m);
  if (v < 2) {
    throw UserError(fmt::format(
        "interleaved_1f1b needs at least 2 stages per device, got {}. Fix: use 2 or more virtual stages, or "
        "one_f_one_b for one stage per device",
        v));
  }
  // torch's ScheduleInterleaved1F1B (torch 2.15, with PR 129597's flexible micro-batch counts):
  // the micro-batches run in R = max(1, floor(m/p)) rounds of m/R, each chunk taking a round's
  // micro-batches before the next chunk does (depth first). With m a multiple of p and m > p
  // this is Megatron-LM's order (rounds of p); Megatron refuses other counts and runs every
  // forward first when m == p, which holds more micro-batches on the later devices for the same
  // makespan (docs/schedules.md).
  // With sequence segments, Seq1F1B's interleaved form (thunlp/Seq1F1B) takes p units per
  // round; a round here holds whole micro-batches, ceil(p/k) of them (p units when k divides p),
  // so that each micro-batch's backwards can run its segments in reverse.
  const int group = segments > 1 ? std::min(m, (p + segments - 1) / segments) : 0;
  const int rounds = segments > 1 ? m / group : std::max(1, m / p);
  if (m % rounds != 0 || (segments > 1 && m % group != 0)) {
    if (segments > 1) {
      throw UserError(fmt::format("interleaved_1f1b: {} micro-batches of {} segments on {} devices: rounds hold {} "
                                  "whole micro-batches (ceil(devices / segments)), which {} does not divide. Fix: use "
                                  "a multiple of {} micro-batches",
                                  m, segments, p, group, m, group));
    }
    throw UserError(fmt::format("interleaved_1f1b: {} micro-batches on {} devices make {} rounds, which {} does not "
                                "divide (torch's rule). Fix: use a multiple of {} micro-batches, or of {}",
                                m, p, rounds, m, rounds, p));
  }
  const int per_round = m / rounds * segments;
  Schedule s(p * v, p);
  const int total = m * segments * v;  // (chunk, unit) pairs per device
  for (int d = 0; d < p; ++d) {
    // Warm-up: the last device needs (v-1) rounds of forwards before its first backward
    // (micro-batch 0 must pass all v chunks), each device before it 2 more (the forward to the
    // device after it and the backward back); segments - 1 more for the backward of a
    // micro-batch's last segment, which comes first.
    const int warmup = std::min((v - 1) * per_round + 2 * (p - 1 - d) + segments - 1, total);
    std::vector<int> forwards(static_cast<size_t>(p * v), 0), backwards(static_cast<size_t>(p * v), 0);
    // The k-th forward runs on chunk (k / per_round) mod v; the k-th backward walks the chunks
    // in reverse (the last chunk's gradients come back first); units count per stage, the
    // backwards' reversed within each micro-batch (reversed_segment()).
    const auto forward = [&](int k) {
      const int stage = ((k / per_round) % v) * p + d;
      s.add(d, Action::F(stage, forwards[static_cast<size_t>(stage)]++));
    };
    const auto backward = [&](int k) {
      const int stage = (v - 1 - (k / per_round) % v) * p + d;
      s.add(d, Action::B(stage, reversed_segment(backwards[static_cast<size_t>(stage)]++, segments)));
    };
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k + warmup < total; ++k) {  // steady state: one forward, one backward
      forward(k + warmup);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);  // cool-down
  }
  add_updates(s, looped_placement(p, v));
  s.set_segments(segments);
  return s;
}

Schedule looped_bfs(int p, int v, int m) {
  require_sizes("looped_bfs", p, v, m);
  // Lamy-Poirier's breadth-first order (torch's ScheduleLoopedBFS): GPipe on each of the
  // device's stages in turn. Every forward of stage d precedes every forward of stage d + p on
  // device d, so micro-batch 0 comes back to device d (as stage d + p) p time units after it
  // left; with m >= p the device is still busy with stage d's other micro-batches then and
  // never waits between loops, and the backwards mirror it: makespan (v*m + p-1)(F+B), the
  // bubble (p-1)/(v*m + p-1), interleaved 1F1B's, at the price of all v*m micro-batches held
  // (GPipe's memory). With m < p a device waits p - m forward times each time its micro-batches
  // come back to it, and p - m backward times on the way back.
  Schedule s(p * v, p);
  for (int d = 0; d < p; ++d) {
    for (int c = 0; c < v; ++c) {
      for (int j = 0; j < m; ++j) s.add(d, Action::F(c * p + d, j));
    }
    // Backwards in reverse micro-batch order, as GPipe (and torch's LoopedBFS) do: the last
    // micro-batch's gradient is the first to come back.
    for (int c = v - 1; c >= 0; --c) {
      for (int j = m - 1; j >= 0; --j) s.add(d, Action::B(c * p + d, j));
    }
  }
  add_updates(s, looped_placement(p, v));
  return s;
}

}  // namespace pipelab::schedules
