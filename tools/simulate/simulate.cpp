#include "tools/simulate/simulate.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "core/plan/run_plan.h"
#include "core/plan/topology.h"
#include "core/schedule/lower.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "core/util/error.h"
#include "tools/simulate/contention.h"
#include "tools/simulate/sim_memory.h"
#include "tools/simulate/unit_scale.h"

namespace pipelab::sim {
namespace {

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

/// Per action of `s`, the work on its stage's weights its scheme's policy does (Scheme::
/// weight_work, from each stage's actions in order): keyed by (stage, kind, micro-batch). An
/// update has no number to key it by, so each of a stage's updates takes their mean (the
/// prediction meter closes at some updates only, a momentum term starts after the first).
using WeightWorkMap = std::map<std::tuple<int, ActionKind, int>, WeightWork>;
std::shared_ptr<const WeightWorkMap> weight_work_of(const Schedule& s, const RunPlan& plan) {
  std::map<int, std::vector<Action>> by_stage;
  for (int d = 0; d < s.devices(); ++d) {
    for (const Action& a : s.device(d)) {
      if (a.stage >= 0 && (is_compute(a.kind) || a.kind == ActionKind::Update)) by_stage[a.stage].push_back(a);
    }
  }
  auto out = std::make_shared<WeightWorkMap>();
  for (const auto& [stage, actions] : by_stage) {
    const int position = plan.layout().position(stage);
    const WeightWorks work = plan.scheme().weight_work(actions, position, plan.stages());
    WeightWork updates;
    int update_count = 0;
    for (size_t i = 0; i < actions.size() && i < work.size(); ++i) {
      if (actions[i].kind == ActionKind::Update) {
        updates += work[i];
        ++update_count;
      } else if (work[i].copies > 0 || work[i].predictions > 0) {
        (*out)[{stage, actions[i].kind, actions[i].mb}] = work[i];
      }
    }
    if (update_count > 0 && (updates.copies > 0 || updates.predictions > 0)) {
      (*out)[{stage, ActionKind::Update, -1}] = {updates.copies / update_count, updates.predictions / update_count};
    }
  }
  return out;
}

EventCosts event_costs(const Schedule& schedule, const SimCosts& c, const SimOptions& o, const RunPlan& plan,
                       const std::shared_ptr<const UnitScale>& scale) {
  EventCosts e;
  e.overlap = o.overlap;
  e.one_worker = o.one_worker;
  auto recompute = std::make_shared<std::vector<bool>>();
  for (size_t s = 0; s < c.stages.size(); ++s) recompute->push_back(recomputes(c, plan, static_cast<int>(s)));
  // Weight versions priced: each copy a scheme's policy makes passes over the stage's weights,
  // each prediction costs what the stage's update does.
  const auto work = weight_work_of(schedule, plan);
  e.compute = [&c, &o, recompute, scale, work](int d, const Action& a) {
    const auto slow = o.slow.find(d);
    const StageCosts& k = c.stages.at(static_cast<size_t>(a.stage));
    const double t = action_time(k, a.kind, (*recompute)[static_cast<size_t>(a.stage)]);
    // An update's time does not depend on the units before it.
    const double unit = a.kind == ActionKind::Update ? 1.0 : scale->seconds(a);
    const auto w = work->find({a.stage, a.kind, a.mb});
    const double copying = w == work->end() ? 0.0
                                            : w->second.copies * k.weight_copy_seconds +
                                                  w->second.predictions * k.prediction_seconds;
    return (t * unit + copying) * (slow == o.slow.end() ? 1.0 : slow->second);
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
    return c.link.host_seconds(c.stages.at(static_cast<size_t>(a.stage)).offloaded_bytes() * scale->work(a));
  };
  auto across = std::make_shared<std::vector<char>>(rings_across_nodes(plan, c.link));
  e.collective = [&c, &plan, inter, across](const Action& a) {
    const auto id = static_cast<size_t>(a.stage);
    const LinkSpec& link = id < across->size() && (*across)[id] ? *inter : c.link;
    return collective_time(link, c.stages.at(id), stage_copies(plan, a.stage));
  };
  return e;
}

/// Whether `plan`'s replicas would replay alike (SimOptions::one_replica): whole pipelines,
/// each on devices of its own numbered as the first's (no joint placement, as Chimera's),
/// whose stages fall on nodes as the first's do, costed alike, with devices that do not share
/// one worker or a host's bandwidth (the slowdown of each depends on how many compute at once).
bool replicas_alike(const RunPlan& plan, const SimCosts& c, const SimOptions& o) {
  const bool shared_host = std::any_of(c.busy_slowdown.begin(), c.busy_slowdown.end(), [](double f) { return f > 1; });
  if (!plan.separate_replicas() || o.one_worker || !o.slow.empty() || shared_host) return false;
  const std::vector<int>& at = plan.placement();
  const auto stages = static_cast<size_t>(plan.stages());
  const int per_node = c.link.devices_per_node;
  if (per_node <= 0) return true;
  std::vector<int> first_nodes;  // the first replica's node of each stage, numbered from its first
  for (size_t id = 0; id < at.size(); ++id) {
    const size_t r = id / stages, s = id % stages;
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
    for (size_t id = 0; id < at.size(); ++id)
      all[static_cast<size_t>(at[id])] = v.at(static_cast<size_t>(at[id % stages]));
    v = std::move(all);
  };
  for (auto* v :
       {&r.busy, &r.static_bytes, &r.peak_activation_bytes, &r.peak_bytes, &r.gradient_bytes, &r.host_peak_bytes}) {
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
  r.timeline = replay_with_contention(r.schedule, event_costs(r.schedule, costs, o, plan, scale),
                                      {costs.busy_slowdown, costs.link.overlap_slowdown});
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

int stage_copies(const RunPlan& plan, int stage) {
  const StageLayout& layout = plan.layout();
  return layout.replicated() ? layout.counts().at(static_cast<size_t>(layout.position(stage))) : 1;
}

double collective_seconds(const SimCosts& one_pipeline, const RunPlan& plan, int stage) {
  const int p = plan.layout().replicated() ? plan.layout().position(stage) : stage;
  const StageCosts& k = one_pipeline.stages.at(static_cast<size_t>(p));
  const double within = collective_time(one_pipeline.link, k, stage_copies(plan, stage));
  if (one_pipeline.link.devices_per_node <= 0) return within;
  // The faster of the two links: the planner's bound must not exceed the replay.
  return std::min(within, collective_time(one_pipeline.link.between_nodes(), k, stage_copies(plan, stage)));
}

double compute_seconds(const SimCosts& one_pipeline, const RunPlan& plan, int stage, ActionKind kind) {
  const int p = plan.layout().replicated() ? plan.layout().position(stage) : stage;
  return action_time(one_pipeline.stages.at(static_cast<size_t>(p)), kind, recomputes(one_pipeline, plan, p));
}

SimResult simulate(const RunPlan& plan, int units, double examples, const SimCosts& one_pipeline,
                   const SimOptions& options, int units_per_step) {
  const SimCosts costs = plan_costs(one_pipeline, plan);
  const auto unit = std::make_shared<const UnitScale>(plan, costs, options.lengths);
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
        bytes += collective_bytes(costs.stages.at(static_cast<size_t>(x.action.stage)), stage_copies(plan, x.action.stage));
      }
    }
  }
  // Per step: a flushed scheme's replay is one step; otherwise units_per_step units' share.
  r.bytes_per_step = plan.flushed() ? bytes / steps : bytes * units_per_step / units;
  add_memory(r, plan, costs, *unit);
  if (one) copy_to_replicas(r, plan);
  r.topology = topology_of(plan);
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
