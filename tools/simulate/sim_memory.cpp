#include "tools/simulate/sim_memory.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

namespace pipelab::sim {
namespace {

/// Replayed inputs (Schedule::reads: DGL's buffers; one pipeline, so stage - 1 sent them)
/// stay on device `d` from their arrival to the start of the last forward that reads them.
void add_replayed_inputs(const SimResult& r, const SimCosts& c, size_t d,
                         std::vector<std::pair<double, double>>& changes) {
  std::map<std::pair<int, int>, int> unread;  // (stage, received mb) -> readers to come
  for (const TimedAction& x : r.timeline.devices[d]) {
    const Action& a = x.action;
    if (a.stage < 1) continue;
    const double bytes = c.stages[static_cast<size_t>(a.stage - 1)].activation_bytes;
    if (a.kind == ActionKind::RecvF && r.schedule.readers(a.stage, a.mb) > 0) {
      unread[{a.stage, a.mb}] = r.schedule.readers(a.stage, a.mb);
      changes.push_back({x.end, bytes});
    }
    if (a.kind != ActionKind::Forward) continue;
    const auto it = unread.find({a.stage, r.schedule.reads(a.stage, a.mb)});
    if (it != unread.end() && --it->second == 0) {
      changes.push_back({x.start, -bytes});
      unread.erase(it);
    }
  }
}

/// When each micro-batch's backward ends (its B, or its W when split), on any device: per
/// stage, per micro-batch number (-1: none in the replay). A flat table: the planner replays
/// thousands of schedules.
using BackwardEnds = std::vector<std::vector<double>>;
BackwardEnds backward_ends(const SimResult& r) {
  BackwardEnds out(static_cast<size_t>(std::max(0, r.stages)));
  for (const auto& row : r.timeline.devices) {
    for (const TimedAction& x : row) {
      const Action& a = x.action;
      if (!kind_info(a.kind).frees_micro_batch || a.stage < 0 || a.mb < 0 || a.stage >= r.stages) continue;
      std::vector<double>& ends = out[static_cast<size_t>(a.stage)];
      if (ends.size() <= static_cast<size_t>(a.mb)) ends.resize(static_cast<size_t>(a.mb) + 1, -1);
      ends[static_cast<size_t>(a.mb)] = x.end;
    }
  }
  return out;
}

/// The gradients device `d`'s stages send back stay, from the send until the receiver's
/// backward of that micro-batch ends: it starts from them (a split backward keeps them from
/// its I to its W). So do the activations a recomputing stage sends on: it keeps none of its
/// own, but the receiver keeps its input until its backward ends (a stage that keeps its
/// activations holds its output that long anyway). Both count where they were made, as one
/// process's memory meter counts them; across processes the receiver holds a copy for that
/// time and the sender's goes.
void add_sent_messages(const SimResult& r, const std::vector<StageMemory>& held, const SimCosts& c,
                       const UnitScale& unit, size_t d, const BackwardEnds& ends,
                       std::vector<std::pair<double, double>>& changes) {
  for (const TimedAction& x : r.timeline.devices[d]) {
    const Action& a = x.action;
    if (!is_send(a.kind) || a.stage < 0 || a.mb < 0) continue;
    const StageCosts& k = c.stages[static_cast<size_t>(a.stage)];
    const bool back = payload(a.kind) == 'B';
    if (!back && (payload(a.kind) != 'F' || !held[static_cast<size_t>(a.stage)].recompute)) continue;
    const int to = peer(a);
    const double bytes = (back ? k.gradient_bytes : k.activation_bytes) * unit.tokens(a);
    if (to < 0 || to >= r.stages || bytes <= 0) continue;
    const std::vector<double>& at = ends[static_cast<size_t>(to)];
    if (static_cast<size_t>(a.mb) >= at.size() || at[static_cast<size_t>(a.mb)] < 0) continue;
    changes.push_back({x.start, bytes});
    changes.push_back({std::max(x.start, at[static_cast<size_t>(a.mb)]), -bytes});
  }
}

/// The copies to and from the host on any device (EventTimeline::copies), by (stage, mb, kind
/// of the OFFLOAD or RELOAD): indexed once per replay, read by every device's walk.
using Copies = std::map<std::tuple<int, int, ActionKind>, const TimedTransfer*>;
Copies copies_of(const SimResult& r) {
  Copies out;
  for (const TimedTransfer& x : r.timeline.copies) out[{x.send.stage, x.send.mb, x.send.kind}] = &x;
  return out;
}

/// One device's bytes above its static ones over a replay: steps (an allocation or a free at
/// an instant) and spikes (what an action of no duration needs for that instant, above the
/// level the steps at that instant leave).
struct DeviceBytes {
  std::vector<std::pair<double, double>> steps, spikes;  // (time, bytes)

  /// `bytes` on top from `start` to `end` (for that instant when they are equal).
  void during(double start, double end, double bytes) {
    if (bytes <= 0) return;
    if (end > start) {
      steps.push_back({start, bytes});
      steps.push_back({end, -bytes});
    } else {
      spikes.push_back({start, bytes});
    }
  }
  /// `bytes` on top while `x` runs.
  void during(const TimedAction& x, double bytes) { during(x.start, x.end, bytes); }

  /// Walks the curve in time order (frees before allocations at the same instant) into
  /// `curve` (above `base`), and returns its peak.
  double walk(double base, std::vector<MemoryPoint>& curve) {
    const auto order = [](const auto& p, const auto& q) {
      return p.first < q.first || (p.first == q.first && p.second < q.second);
    };
    std::stable_sort(steps.begin(), steps.end(), order);
    std::stable_sort(spikes.begin(), spikes.end(), order);
    double now = 0, peak = 0;
    size_t next = 0;
    const auto spikes_before = [&](double t) {
      for (; next < spikes.size() && spikes[next].first < t; ++next) {
        peak = std::max(peak, now + spikes[next].second);
        curve.push_back({spikes[next].first, base + now + spikes[next].second});
        curve.push_back({spikes[next].first, base + now});
      }
    };
    curve.push_back({0, base});
    for (const auto& [t, delta] : steps) {
      spikes_before(t);
      now += delta;
      peak = std::max(peak, now);
      curve.push_back({t, base + now});
    }
    spikes_before(std::numeric_limits<double>::infinity());
    return peak;
  }
};

/// Per device, the sums an in-process collective makes (the sequential and
/// threaded executors, core/comm/collective.cpp): the first member of a round to arrive sums
/// every member's gradients on its own device, one sum per pipeline stage of the group (a
/// stage's replicas, or every stage when the collective spans the model), and they live until
/// the last member has copied its share (the first may be in its update by then). The others
/// hold none. Members that arrive together in the replay (the threaded executor's) give the
/// sums to the lowest device; which thread wins in a run depends on its timing. Across
/// processes each member makes its own (add_action_bytes), so this is empty.
std::vector<DeviceBytes> in_process_sums(const SimResult& r, const RunPlan& plan, const SimCosts& c) {
  std::vector<DeviceBytes> out(r.timeline.devices.size());
  if (plan.several_processes()) return out;
  const StageLayout& layout = plan.layout();
  const auto position = [&](int stage) { return layout.replicated() ? layout.position(stage) : stage; };
  const bool model = plan.sync().scope == CollectiveScope::Model;
  struct Round {
    double start = std::numeric_limits<double>::infinity(), end = -std::numeric_limits<double>::infinity();
    size_t device = 0;
    std::map<int, int> stages;  // pipeline stage -> one of its copies (the costs' index)
  };
  std::map<std::pair<int, int>, Round> rounds;  // (group, round) -> its members' span
  std::map<int, int> done;                      // stage -> its ALLREDUCEs so far
  for (size_t d = 0; d < r.timeline.devices.size(); ++d) {
    for (const TimedAction& x : r.timeline.devices[d]) {
      const Action& a = x.action;
      if (a.stage < 0 || kind_info(a.kind).role != KindRole::Collective) continue;
      Round& round = rounds[{model ? 0 : position(a.stage), done[a.stage]++}];
      if (x.start < round.start) {
        round.start = x.start;
        round.device = d;
      }
      round.end = std::max(round.end, x.end);
      round.stages.emplace(position(a.stage), a.stage);
    }
  }
  for (const auto& [key, round] : rounds) {
    double bytes = 0;
    for (const auto& [p, stage] : round.stages) bytes += c.stages[static_cast<size_t>(stage)].parameter_bytes;
    out[round.device].during(round.start, round.end, bytes);
  }
  return out;
}

/// The bytes of device `d`'s actions: +retained at each F's end (none under recompute, all of
/// it from the backward's start), + what a split backward's I keeps for its
/// W at the I's end, and all of it back when the micro-batch's backward ends (its W, when
/// the backward is split); while an action runs, its transient
/// bytes on top; and in processes, from an ALLREDUCE's start to the end of the update after
/// it, the member's own sum of the stage's gradients (in one process: in_process_sums).
void add_action_bytes(const SimResult& r, const RunPlan& plan, const std::vector<StageMemory>& held, const SimCosts& c,
                      const UnitScale& unit, const Copies& copies, size_t d, DeviceBytes& bytes, DeviceBytes& host) {
  std::map<std::pair<int, int>, double> held_by;  // (stage, mb) -> bytes it holds now
  std::map<std::pair<int, int>, double> away;     // (stage, mb) -> bytes an OFFLOAD moved to the host
  // Per stage, whether its gradient exists in this step (a B or W made it).
  std::vector<char> accumulating(c.stages.size(), 0);
  std::map<int, const TimedAction*> summed;  // stage -> its ALLREDUCE whose update is to come
  for (const TimedAction& x : r.timeline.devices[d]) {
    const Action& a = x.action;
    if (a.stage < 0) continue;
    const StageCosts& k = c.stages[static_cast<size_t>(a.stage)];
    if (kind_info(a.kind).role == KindRole::Collective && plan.several_processes()) {
      summed[a.stage] = &x;
      // In processes, while it runs: the member's gradients concatenated, every member's
      // gathered (core/processes/group_all_reduce.cpp) and, before they are split out, gloo's flat
      // buffer of them all (ProcessGroupGloo's all-gather): 2 R + 1 gradients, on top of the
      // sum held below. Measured: `dp` over 4 processes held exactly that (204.7 MiB a rank).
      bytes.during(x, (2.0 * stage_copies(plan, a.stage) + 1) * k.parameter_bytes);
    }
    if (a.kind == ActionKind::Update) {
      accumulating[static_cast<size_t>(a.stage)] = 0;
      const auto sums = summed.find(a.stage);
      if (sums != summed.end()) {
        bytes.steps.push_back({sums->second->start, k.parameter_bytes});
        bytes.steps.push_back({x.end, -k.parameter_bytes});
        summed.erase(sums);
      }
    }
    if (is_memory(a.kind)) {
      // What the micro-batch holds leaves the device when its copy to the host has ended, and
      // is back from the start of the copy that reloads it.
      const TimedTransfer& copy = *copies.at({a.stage, a.mb, a.kind});
      double& holds = held_by[{a.stage, a.mb}];
      if (a.kind == ActionKind::Offload) {
        const double moved = std::min(holds, k.offloaded_bytes() * unit.work(a));
        away[{a.stage, a.mb}] = moved;
        bytes.steps.push_back({copy.end, -moved});
        host.steps.push_back({copy.start, moved});
        holds -= moved;
      } else {
        const double moved = away[{a.stage, a.mb}];
        bytes.steps.push_back({copy.start, moved});
        host.steps.push_back({copy.end, -moved});
        holds += moved;
      }
      continue;
    }
    if (!is_compute(a.kind)) continue;
    // A recomputing stage keeps only its input, which the stage before it made (counted
    // there, add_sent_messages) or the feed did.
    const bool recompute = held[static_cast<size_t>(a.stage)].recompute;
    const double share = a.kind == ActionKind::Update ? 1.0 : unit.work(a);
    const double retained = k.retained_bytes * share + (a.kind == ActionKind::Update ? 0.0 : k.retained_fixed_bytes);
    const double kept = recompute ? 0.0 : retained;
    // What the action needs while it runs, above the level at its start. A transient is that
    // of a backward that adds into the stage's gradient (a temporary of its size); the first
    // one of a step makes the gradient instead, which the static bytes hold already.
    double transient = k.transient_of(a.kind) * share;
    if (kind_info(a.kind).leaves_gradient && !accumulating[static_cast<size_t>(a.stage)]) {
      accumulating[static_cast<size_t>(a.stage)] = 1;
      transient = std::max(0.0, transient - k.parameter_bytes);
    }
    bytes.during(x, transient);
    double& holds = held_by[{a.stage, a.mb}];
    if (a.kind == ActionKind::Forward) {
      bytes.steps.push_back({x.end, kept});
      holds += kept;
    }
    const bool first_backward = kind_info(a.kind).takes_gradients;  // B, or I when split
    // The recomputed forward (a transient measured in a recomputing run includes it already).
    if (first_backward && recompute && (transient == 0 || !k.recompute_in_transient)) {
      bytes.steps.push_back({x.start, retained - kept});
      holds += retained - kept;
    }
    // A split backward's I keeps, until its W, the gradients W starts from.
    if (first_backward && !kind_info(a.kind).frees_micro_batch) {
      bytes.steps.push_back({x.end, k.backward_input_kept_bytes * share});
      holds += k.backward_input_kept_bytes * share;
    }
    // B, or W when split (a micro-batch takes one or the other: the validator).
    if (kind_info(a.kind).frees_micro_batch) {
      bytes.steps.push_back({x.end, -holds});  // what this micro-batch held, all of it
      holds = 0;
    }
  }
  // In processes, an ALLREDUCE no update follows in the replay holds its buffer while it runs.
  for (const auto& [stage, x] : summed) bytes.during(*x, c.stages[static_cast<size_t>(stage)].parameter_bytes);
}

}  // namespace

void add_memory(SimResult& r, const RunPlan& plan, const SimCosts& c, const UnitScale& unit) {
  const std::vector<int> placement = r.schedule.placement();
  const size_t devices = static_cast<size_t>(r.devices);
  r.static_bytes.assign(devices, 0);
  r.peak_activation_bytes.assign(devices, 0);
  r.peak_bytes.assign(devices, 0);
  r.host_peak_bytes.assign(devices, 0);
  r.gradient_bytes.assign(devices, 0);
  r.memory.assign(devices, {});
  std::vector<StageMemory> held;
  for (int s = 0; s < r.stages; ++s) {
    held.push_back(plan.stage_memory(s));
    const StageCosts& k = c.stages[static_cast<size_t>(s)];
    const int d = placement[static_cast<size_t>(s)];
    if (d < 0) continue;
    r.static_bytes[static_cast<size_t>(d)] += static_bytes(k, held.back());
    r.gradient_bytes[static_cast<size_t>(d)] += 2 * k.parameter_bytes;
  }
  const BackwardEnds ends = backward_ends(r);
  const Copies copies = copies_of(r);
  std::vector<DeviceBytes> sums = in_process_sums(r, plan, c);
  for (size_t d = 0; d < devices; ++d) {
    DeviceBytes& bytes = sums[d];
    DeviceBytes host;
    if (r.schedule.replays()) add_replayed_inputs(r, c, d, bytes.steps);
    add_sent_messages(r, held, c, unit, d, ends, bytes.steps);
    add_action_bytes(r, plan, held, c, unit, copies, d, bytes, host);
    r.peak_activation_bytes[d] = bytes.walk(r.static_bytes[d], r.memory[d]);
    std::vector<MemoryPoint> host_curve;
    r.host_peak_bytes[d] = host.walk(0, host_curve);
    r.peak_bytes[d] = r.static_bytes[d] + r.peak_activation_bytes[d];
  }
}

}  // namespace pipelab::sim
