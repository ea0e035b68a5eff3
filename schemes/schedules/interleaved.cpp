/// Looped placements: interleaved 1F1B and the looped BFS. Both place stage s on device s % p, so
/// a micro-batch loops v times over the p devices; they differ in the order a device runs its
/// stages' work (depth-first in groups of p micro-batches, or breadth-first over all of them).
#include <fmt/format.h>

#include <algorithm>

#include "core/util/error.h"
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

Schedule interleaved_1f1b(int p, int v, int m) {
  require_sizes("interleaved_1f1b", p, v, m);
  if (v < 2) {
    throw UserError(fmt::format(
        "interleaved_1f1b needs at least 2 stages per device, got {}. Fix: use 2 or more virtual stages, or "
        "one_f_one_b for one stage per device",
        v));
  }
  // Megatron walks the micro-batches in groups of p, all chunks of a group before the next
  // group, and asserts that the groups are full (num_microbatches % pipeline_parallel_size).
  if (m % p != 0) {
    throw UserError(fmt::format(
        "interleaved_1f1b runs the micro-batches in groups of {} (one per device): {} is not a multiple of {}. "
        "Fix: use a number of micro-batches that is a multiple of {}",
        p, m, p, p));
  }
  Schedule s(p * v, p);
  const int total = m * v;  // (chunk, micro-batch) pairs per device
  // The k-th forward of a device (Megatron's get_model_chunk_id / microbatch id): k runs over
  // groups of p*v; inside a group, chunk (k % pv) / p on micro-batch (k / pv) * p + k % p, so
  // each chunk takes the group's p micro-batches before the next chunk does (depth first).
  // The k-th backward walks the same sequence with the chunks reversed (the last chunk's
  // gradients come back first).
  const auto chunk = [&](int k) { return (k % (p * v)) / p; };
  const auto micro_batch = [&](int k) { return (k / (p * v)) * p + k % p; };
  for (int d = 0; d < p; ++d) {
    // Warm-up: the last device needs (v-1)p forwards before its first backward (micro-batch
    // 0 must pass all v chunks), each device before it 2 more (the forward to the device after
    // it and the backward back). Megatron runs every forward first when m == p.
    const int warmup = m == p ? total : std::min(2 * (p - 1 - d) + (v - 1) * p, total);
    const auto forward = [&](int k) { return Action::F(chunk(k) * p + d, micro_batch(k)); };
    const auto backward = [&](int k) { return Action::B((v - 1 - chunk(k)) * p + d, micro_batch(k)); };
    for (int k = 0; k < warmup; ++k) s.add(d, forward(k));
    for (int k = 0; k + warmup < total; ++k) {  // steady state: one forward, one backward
      s.add(d, forward(k + warmup));
      s.add(d, backward(k));
    }
    for (int k = total - warmup; k < total; ++k) s.add(d, backward(k));  // cool-down
  }
  add_updates(s, looped_placement(p, v));
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
