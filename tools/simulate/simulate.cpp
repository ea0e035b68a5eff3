#include "tools/simulate/simulate.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "core/plan/run_plan.h"
#include "core/util/error.h"
#include "tools/simulate/shared_host.h"

namespace pipelab::sim {
namespace {

/// What one unit of the schedule costs against one unit of the costs. Units are micro-batches
/// unless the plan cuts sequences into segments (core/scheme/sequence_split.h): segment j then
/// does its share of the micro-batch's work and carries its share of the tokens (messages).
/// The work's share is the cost model's (the computation-wise partition, docs/schemes.md §1)
/// for the activations a segment keeps, which grow with the keys its queries read as the work
/// does, and for its seconds unless the costs were measured in as many segments (then each
/// stage's measured shares, StageCosts::segment_shares) or derived from blocks timed at
/// several sizes (add_timed_shares). Costs measured in segments are one segment's on average:
/// k_c of them make a micro-batch.
class UnitScale {
 public:
  UnitScale(const RunPlan& plan, const SimCosts& c) {
    const SequenceSplit& split = plan.sequence_split();
    if (!split.active() && c.segments <= 1) return;
    const double measured = std::max(1, c.segments);
    if (!split.active()) {
      work_ = tokens_ = {measured};
      return;
    }
    if (c.sequence_length >= 1 && c.sequence_length < split.segments) {
      // A length, but shorter than the segments: each needs a token of its own.
      throw UserError(fmt::format("scheme {} cuts each sequence into {} segments, but the sequences have {} tokens. "
                                  "Fix: use at most {} segments",
                                  plan.scheme().type(), split.segments, static_cast<int64_t>(c.sequence_length),
                                  static_cast<int64_t>(c.sequence_length)));
    }
    if (c.sequence_length < split.segments) {
      throw UserError(fmt::format("scheme {} cuts each sequence into {} segments, but the costs ({}) give no sequence "
                                  "length to cut. Fix: use costs measured by a run of a sequence model "
                                  "(metrics/costs.json) or derived from one",
                                  plan.scheme().type(), split.segments, c.source));
    }
    const int64_t length = static_cast<int64_t>(c.sequence_length);
    const std::vector<int64_t> cuts = split.cuts(length);
    const double whole = split.work(0, length);
    for (int j = 0; j < split.segments; ++j) {
      work_.push_back(split.work(cuts[static_cast<size_t>(j)], cuts[static_cast<size_t>(j) + 1]) / whole * measured);
      tokens_.push_back(static_cast<double>(cuts[static_cast<size_t>(j) + 1] - cuts[static_cast<size_t>(j)]) /
                        static_cast<double>(length) * measured);
    }
    if (c.segments == 1) add_timed_shares(c);
    if (c.segments != split.segments) return;
    for (const StageCosts& k : c.stages) {
      std::vector<double> shares;
      if (k.segment_shares.size() == static_cast<size_t>(split.segments)) {
        for (const double x : k.segment_shares) shares.push_back(x * measured);
      }
      seconds_.push_back(shares);
    }
  }
  /// Of an action's seconds, of the bytes it keeps, of its messages' bytes.
  double seconds(const Action& a) const {
    const size_t st = static_cast<size_t>(a.stage);
    return st < seconds_.size() && !seconds_[st].empty() ? of(seconds_[st], a) : of(work_, a);
  }
  double work(const Action& a) const { return of(work_, a); }
  double tokens(const Action& a) const { return of(tokens_, a); }

 private:
  /// Costs from blocks timed at several sizes (StageCosts::timed_seconds): each stage's
  /// segment j costs what n t_j examples of whole sequences cost (n the micro-batch's
  /// examples, t_j the segment's share of the tokens), times its work per token against the
  /// whole sequence's (w_j / t_j), as a share of the micro-batch's seconds. With costs linear
  /// in the examples that is w_j; short segments cost more, by their kernels' fixed costs.
  void add_timed_shares(const SimCosts& c) {
    const double n = c.micro_batch_size;
    for (const StageCosts& k : c.stages) {
      std::vector<double> shares;
      const double whole = k.timed_seconds.empty() || n <= 0 ? 0.0 : k.timed_seconds.at(n);
      for (size_t j = 0; whole > 0 && j < work_.size(); ++j) {
        shares.push_back(k.timed_seconds.at(n * tokens_[j]) / whole * work_[j] / tokens_[j]);
      }
      seconds_.push_back(shares);
    }
  }
  static double of(const std::vector<double>& per_segment, const Action& a) {
    if (per_segment.empty() || a.mb < 0) return 1.0;
    return per_segment[static_cast<size_t>(a.mb) % per_segment.size()];
  }
  std::vector<double> work_, tokens_;
  std::vector<std::vector<double>> seconds_;  ///< per stage, measured
};

double wire_bytes(const SimCosts& c, const Action& send) {
  const StageCosts& s = c.stages.at(static_cast<size_t>(send.stage));
  return payload(send.kind) == 'F' ? s.activation_bytes : s.gradient_bytes;
}

/// The costs of one pipeline's stages, for every stage of the plan: each copy of a pipeline
/// stage (a replica of the whole pipeline, or one of PipeDream's replicated stages) costs
/// what that pipeline stage does.
SimCosts plan_costs(const SimCosts& c, const RunPlan& plan) {
  const StageLayout& layout = plan.layout();
  if (static_cast<int>(c.stages.size()) != plan.stages()) {
    throw UserError(fmt::format("the costs ({}) have {} stage entries, the {} schedule has {}. Fix: give costs "
                                "measured or written for a {}-stage plan, or derive them (--device-flops)",
                                c.source, c.stages.size(), plan.scheme().type(), plan.stages(), plan.stages()));
  }
  if (!layout.replicated()) return c;
  SimCosts out = c;
  out.stages.clear();
  for (int s = 0; s < layout.stages(); ++s) out.stages.push_back(c.stages[static_cast<size_t>(layout.position(s))]);
  return out;
}

/// What each member of a ring all-reduce over `n` holders of `bytes` sends: 2(n-1)/n of them
/// (Patarasuk & Yuan 2009; what NCCL's ring does), in 2(n-1) latency-bound steps.
double ring_bytes(double n, double bytes) { return n < 2 ? 0.0 : 2 * (n - 1) / n * bytes; }

/// The copies of `stage`'s pipeline stage (a replica of the whole pipeline each, or
/// PipeDream's replicated stages): the members of its gradients' ring.
int copies_of(const RunPlan& plan, int stage) {
  const StageLayout& layout = plan.layout();
  return layout.replicated() ? layout.counts().at(static_cast<size_t>(layout.position(stage))) : 1;
}

/// The bytes an ALLREDUCE of a stage costed `k` with `copies` copies sends: its gradients
/// over its copies, and the tied weights it shares with another pipeline stage over every
/// copy of the tie (two per pipeline); a global clip's norm is a scalar and counts nothing.
double collective_bytes(const StageCosts& k, int copies) {
  return ring_bytes(copies, k.parameter_bytes) + ring_bytes(2.0 * copies, k.tied_bytes);
}

/// Seconds of that ALLREDUCE on `link`: its bytes, and 2(n-1) latency-bound steps.
double collective_time(const LinkSpec& link, const StageCosts& k, int copies) {
  const int members = k.tied_bytes > 0 ? 2 * copies : copies;
  const int steps = members < 2 ? 0 : 2 * (members - 1);
  return link.reduce_seconds(collective_bytes(k, copies)) + steps * link.latency_seconds();
}

/// Per stage id of `plan`, whether the ring over its copies spans nodes of `link` (a ring
/// runs at its slowest hop).
std::vector<char> rings_across_nodes(const RunPlan& plan, const LinkSpec& link) {
  const std::vector<int>& placement = plan.placement();
  std::vector<char> out(placement.size(), 0);
  if (link.devices_per_node <= 0) return out;
  const StageLayout& layout = plan.layout();
  std::map<int, std::pair<int, int>> nodes;  // position -> lowest and highest node
  const auto position = [&](size_t id) { return layout.replicated() ? layout.position(static_cast<int>(id)) : static_cast<int>(id); };
  for (size_t id = 0; id < placement.size(); ++id) {
    const int node = placement[id] / link.devices_per_node;
    auto [it, fresh] = nodes.try_emplace(position(id), node, node);
    it->second = {std::min(it->second.first, node), std::max(it->second.second, node)};
  }
  for (size_t id = 0; id < placement.size(); ++id) {
    const auto& span = nodes[position(id)];
    out[id] = span.first != span.second;
  }
  return out;
}

/// Whether stage `s` of `plan` runs its forward again in the action that takes the gradient
/// (activation checkpointing). Measured costs (a run's step_seconds) have that in their
/// backward already; derived and given ones do not.
bool recomputes(const SimCosts& c, const RunPlan& plan, int s) {
  return c.step_seconds <= 0 && plan.stage_memory(s).recompute;
}

/// Seconds of compute action `kind` of a stage costed `s`: the codecs' work joins the
/// forward and the action that takes the gradient, and so does a recomputed forward.
double action_time(const StageCosts& s, ActionKind kind, bool recompute) {
  const bool takes_gradient = kind_info(kind).takes_gradients;
  const double codec = kind == ActionKind::Forward ? s.codec_forward_seconds
                       : takes_gradient            ? s.codec_backward_seconds
                                                   : 0.0;
  const double again = takes_gradient && recompute ? s.seconds_of(ActionKind::Forward) : 0.0;
  return s.seconds_of(kind) + codec + again;
}

EventCosts event_costs(const SimCosts& c, const SimOptions& o, const RunPlan& plan,
                       const std::shared_ptr<const UnitScale>& scale) {
  EventCosts e;
  e.overlap = o.overlap;
  e.one_worker = o.one_worker;
  auto recompute = std::make_shared<std::vector<bool>>();
  for (size_t s = 0; s < c.stages.size(); ++s) recompute->push_back(recomputes(c, plan, static_cast<int>(s)));
  e.compute = [&c, &o, recompute, scale](int d, const Action& a) {
    const auto slow = o.slow.find(d);
    const double t = action_time(c.stages.at(static_cast<size_t>(a.stage)), a.kind,
                                 (*recompute)[static_cast<size_t>(a.stage)]);
    // An update's time does not depend on the units before it.
    const double unit = a.kind == ActionKind::Update ? 1.0 : scale->seconds(a);
    return t * unit * (slow == o.slow.end() ? 1.0 : slow->second);
  };
  // A message between devices of different nodes takes the link between nodes.
  auto inter = std::make_shared<LinkSpec>(c.link.between_nodes());
  const auto link_of = [&c, &plan, inter](const Action& a) -> const LinkSpec& {
    const std::vector<int>& at = plan.placement();
    const auto on = [&at](int id) { return id >= 0 && static_cast<size_t>(id) < at.size() ? at[static_cast<size_t>(id)] : -1; };
    const int from = on(a.stage), to = on(peer(a));  // the neighbour rule when `peer` is -1
    return from >= 0 && to >= 0 && c.link.across_nodes(from, to) ? *inter : c.link;
  };
  e.wire = [&c, scale, link_of](const Action& a) { return link_of(a).wire_seconds(wire_bytes(c, a) * scale->tokens(a)); };
  e.latency = [link_of](const Action& a) { return link_of(a).latency_seconds(); };
  // An OFFLOAD moves what its micro-batch's forward kept; its RELOAD brings it back.
  e.host = [&c, scale](const Action& a) {
    return c.link.host_seconds(c.stages.at(static_cast<size_t>(a.stage)).retained_bytes * scale->work(a));
  };
  auto across = std::make_shared<std::vector<char>>(rings_across_nodes(plan, c.link));
  e.collective = [&c, &plan, inter, across](const Action& a) {
    const auto id = static_cast<size_t>(a.stage);
    const LinkSpec& link = id < across->size() && (*across)[id] ? *inter : c.link;
    return collective_time(link, c.stages.at(id), copies_of(plan, a.stage));
  };
  return e;
}

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
void add_sent_messages(const SimResult& r, const std::vector<StageMemory>& held, const SimCosts& c, const UnitScale& unit,
                       size_t d, const BackwardEnds& ends, std::vector<std::pair<double, double>>& changes) {
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

/// One device's bytes above its static ones over a replay: steps (an allocation or a free at
/// an instant) and spikes (what an action of no duration needs for that instant, above the
/// level the steps at that instant leave).
struct DeviceBytes {
  std::vector<std::pair<double, double>> steps, spikes;  // (time, bytes)

  /// `bytes` on top while `x` runs.
  void during(const TimedAction& x, double bytes) {
    if (bytes <= 0) return;
    if (x.end > x.start) {
      steps.push_back({x.start, bytes});
      steps.push_back({x.end, -bytes});
    } else {
      spikes.push_back({x.start, bytes});
    }
  }

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

/// The bytes of device `d`'s actions: +retained at each F's end (none under recompute, all of
/// it from the backward's start), + what a split backward's I keeps for its
/// W at the I's end, and all of it back when the micro-batch's backward ends (its W, when
/// the backward is split); while an action runs, its transient
/// bytes on top, and from an ALLREDUCE's start to the end of the update after it, a
/// gradient-sized buffer: the sums an in-process collective makes live until the last member
/// has copied them (core/comm/collective.cpp), and the member that made them may be in its
/// update by then (a language model's replicas kept its Adam temporaries on top: 8-13% over
/// the prediction that freed the sums at the ALLREDUCE's end); the buckets a c10d one reduces.
void add_action_bytes(const SimResult& r, const std::vector<StageMemory>& held, const SimCosts& c, const UnitScale& unit,
                      size_t d, DeviceBytes& bytes, DeviceBytes& host) {
  std::map<std::pair<int, int>, double> held_by;  // (stage, mb) -> bytes it holds now
  std::map<std::pair<int, int>, double> away;     // (stage, mb) -> bytes an OFFLOAD moved to the host
  std::map<std::tuple<int, int, ActionKind>, const TimedTransfer*> copies;
  for (const TimedTransfer& x : r.timeline.copies) copies[{x.send.stage, x.send.mb, x.send.kind}] = &x;
  // Per stage, whether its gradient exists in this step (a B or W made it).
  std::vector<char> accumulating(c.stages.size(), 0);
  std::map<int, const TimedAction*> summed;  // stage -> its ALLREDUCE whose update is to come
  for (const TimedAction& x : r.timeline.devices[d]) {
    const Action& a = x.action;
    if (a.stage < 0) continue;
    const StageCosts& k = c.stages[static_cast<size_t>(a.stage)];
    if (kind_info(a.kind).role == KindRole::Collective) summed[a.stage] = &x;
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
        away[{a.stage, a.mb}] = holds;
        bytes.steps.push_back({copy.end, -holds});
        host.steps.push_back({copy.start, holds});
        holds = 0;
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
    const double retained = k.retained_bytes * share;
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
  // An ALLREDUCE no update follows in the replay holds its buffer while it runs.
  for (const auto& [stage, x] : summed) bytes.during(*x, c.stages[static_cast<size_t>(stage)].parameter_bytes);
}

/// Memory per device over the replay: the static part, then what its actions hold
/// (add_action_bytes).
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
  for (size_t d = 0; d < devices; ++d) {
    DeviceBytes bytes, host;
    if (r.schedule.replays()) add_replayed_inputs(r, c, d, bytes.steps);
    add_sent_messages(r, held, c, unit, d, ends, bytes.steps);
    add_action_bytes(r, held, c, unit, d, bytes, host);
    r.peak_activation_bytes[d] = bytes.walk(r.static_bytes[d], r.memory[d]);
    std::vector<MemoryPoint> host_curve;
    r.host_peak_bytes[d] = host.walk(0, host_curve);
    r.peak_bytes[d] = r.static_bytes[d] + r.peak_activation_bytes[d];
  }
}

/// Whether `plan`'s replicas would replay alike (SimOptions::one_replica): whole pipelines,
/// each on devices of its own numbered as the first's (no joint placement, as Chimera's),
/// whose stages fall on nodes as the first's do, costed alike, with devices that do not share
/// one worker or a host's bandwidth (the slowdown of each depends on how many compute at once).
bool replicas_alike(const RunPlan& plan, const SimCosts& c, const SimOptions& o) {
  const bool shared_host = std::any_of(c.busy_slowdown.begin(), c.busy_slowdown.end(), [](double f) { return f > 1; });
  if (plan.replicas() < 2 || o.one_worker || !o.slow.empty() || shared_host) return false;
  const std::vector<int>& at = plan.placement();
  const auto stages = static_cast<size_t>(plan.stages());
  const int devices = *std::max_element(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(stages)) + 1;
  const int per_node = c.link.devices_per_node;
  std::vector<int> first_nodes;  // the first replica's node of each stage, numbered from its first
  for (size_t id = 0; id < at.size(); ++id) {
    const size_t r = id / stages, s = id % stages;
    if (at[id] != static_cast<int>(r) * devices + at[s]) return false;
    if (per_node <= 0) continue;
    const int node = at[id] / per_node - at[r * stages] / per_node;
    if (r == 0) first_nodes.push_back(node);
    if (node != first_nodes[s]) return false;
  }
  return true;
}

/// The first replica's per-device figures copied to the devices of the others (as
/// replicas_alike places them), its bytes counted for every replica.
void copy_to_replicas(SimResult& r, const RunPlan& plan) {
  const std::vector<int>& at = plan.placement();
  const auto stages = static_cast<size_t>(plan.stages());
  const auto widen = [&](std::vector<double>& v) {
    std::vector<double> all(static_cast<size_t>(plan.devices()), 0.0);
    for (size_t id = 0; id < at.size(); ++id) all[static_cast<size_t>(at[id])] = v.at(static_cast<size_t>(at[id % stages]));
    v = std::move(all);
  };
  for (auto* v : {&r.busy, &r.static_bytes, &r.peak_activation_bytes, &r.peak_bytes, &r.gradient_bytes,
                  &r.host_peak_bytes}) {
    widen(*v);
  }
  r.bytes_per_step *= plan.replicas();
  r.devices = plan.devices();
}

/// `costs`: every stage of the plan (plan_costs); `replayed`: the plan, or its first replica.
SimResult replay_plan(const RunPlan& plan, const RunPlan& replayed, int units, const SimCosts& costs,
                      const SimOptions& o, const std::shared_ptr<const UnitScale>& scale) {
  SimResult r;
  // The run plan's own training schedule (core/plan/run_plan.h): what a run executes.
  r.schedule = replayed.training(equal_units(units, replayed.replicas()));
  if (o.validate) validate_schedule(r.schedule, replayed.rules());
  r.stages = r.schedule.stages();
  r.devices = r.schedule.devices();
  r.units = units;
  r.timeline = replay_sharing_host(r.schedule, event_costs(costs, o, plan, scale), costs.busy_slowdown);
  r.makespan = r.timeline.makespan;
  return r;
}

/// The optimizer steps stage 0 takes in the replay.
int updates_of_stage_0(const SimResult& r) {
  int n = 0;
  for (const auto& row : r.timeline.devices) {
    for (const TimedAction& x : row) n += x.action.stage == 0 && x.action.kind == ActionKind::Update ? 1 : 0;
  }
  return n;
}

double total_busy(const SimResult& r, std::vector<double>* per_device) {
  double busy = 0;
  for (size_t d = 0; d < r.timeline.devices.size(); ++d) {
    double b = 0;
    for (const TimedAction& x : r.timeline.devices[d]) {
      if (is_compute(x.action.kind)) b += x.end - x.start;
    }
    if (per_device) per_device->push_back(b);
    busy += b;
  }
  return busy;
}

}  // namespace

double collective_seconds(const SimCosts& one_pipeline, const RunPlan& plan, int stage) {
  const int p = plan.layout().replicated() ? plan.layout().position(stage) : stage;
  const StageCosts& k = one_pipeline.stages.at(static_cast<size_t>(p));
  const double within = collective_time(one_pipeline.link, k, copies_of(plan, stage));
  if (one_pipeline.link.devices_per_node <= 0) return within;
  // The faster of the two links: the planner's bound must not exceed the replay.
  return std::min(within, collective_time(one_pipeline.link.between_nodes(), k, copies_of(plan, stage)));
}

double compute_seconds(const SimCosts& one_pipeline, const RunPlan& plan, int stage, ActionKind kind) {
  const int p = plan.layout().replicated() ? plan.layout().position(stage) : stage;
  return action_time(one_pipeline.stages.at(static_cast<size_t>(p)), kind, recomputes(one_pipeline, plan, p));
}

SimResult simulate(const RunPlan& plan, int units, double examples, const SimCosts& one_pipeline,
                   const SimOptions& options, int units_per_step) {
  const SimCosts costs = plan_costs(one_pipeline, plan);
  const auto unit = std::make_shared<const UnitScale>(plan, costs);
  const bool one = options.one_replica && replicas_alike(plan, costs, options);
  const RunPlan replayed = one ? plan.first_replica() : plan;
  SimResult r = replay_plan(plan, replayed, units, costs, options, unit);
  const double busy = total_busy(r, &r.busy);
  // A flushed replay may hold several optimizer steps (naive, single and dp step after every
  // unit): its per-step figures divide by them.
  r.flushed = plan.flushed();
  const int steps = plan.flushed() ? std::max(1, updates_of_stage_0(r)) : 1;
  if (plan.flushed()) {
    r.step_seconds = r.makespan / steps;
    r.samples_per_second = r.makespan > 0 ? units * examples * plan.replicas() / r.makespan : 0;
    r.bubble = r.makespan > 0 ? 1 - busy / (r.devices * r.makespan) : 0;
  } else {
    // A pipeline that runs on: the time per unit once it is full, and the idle share of
    // that time, from the difference of two replays (U and 2U units).
    const SimResult twice = replay_plan(plan, replayed, 2 * units, costs, options, unit);
    const double span = twice.makespan - r.makespan;
    const double per_unit = span / units;
    r.step_seconds = per_unit * units_per_step;
    r.samples_per_second = per_unit > 0 ? examples / per_unit : 0;
    r.bubble = span > 0 ? 1 - (total_busy(twice, nullptr) - busy) / (r.devices * span) : 0;
  }
  double bytes = 0;
  for (const TimedTransfer& t : r.timeline.transfers) bytes += wire_bytes(costs, t.send) * unit->tokens(t.send);
  for (const auto& row : r.timeline.devices) {
    for (const TimedAction& x : row) {
      if (kind_info(x.action.kind).role == KindRole::Collective) {
        bytes += collective_bytes(costs.stages.at(static_cast<size_t>(x.action.stage)), copies_of(plan, x.action.stage));
      }
    }
  }
  // Per step: a flushed scheme's replay is one step; otherwise units_per_step units' share.
  r.bytes_per_step = plan.flushed() ? bytes / steps : bytes * units_per_step / units;
  add_memory(r, plan, costs, *unit);
  if (one) copy_to_replicas(r, plan);
  return r;
}

SimResult simulate(const RunPlan& plan, const StepShape& step, const SimCosts& costs, const SimOptions& options) {
  return simulate(plan, step.replay_micro_batches, step.examples_per_micro_batch, costs, options, step.micro_batches);
}

SimResult simulate(const Scheme& scheme, int stages, int units, double examples, const SimCosts& one_pipeline,
                   const SimOptions& options, int units_per_step) {
  const std::string refused = replicas_refused(scheme, options.replicas);
  if (!refused.empty()) throw UserError(refused + ". Fix: simulate it without replicas");
  return simulate(RunPlan::whole_pipelines(scheme, stages, options.replicas, options.sync), units, examples,
                  one_pipeline, options, units_per_step);
}

}  // namespace pipelab::sim
