#include "core/scheme/replicas.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/replicate.h"

namespace pipelab {
namespace {

/// `s` with each device's U actions moved to its end, in their order.
Schedule updates_last(const Schedule& s) {
  Schedule out(s.stages(), s.devices());
  out.copy_layout(s);
  for (int d = 0; d < s.devices(); ++d) {
    std::vector<Action> updates;
    for (const Action& a : s.device(d)) {
      if (a.kind == ActionKind::Update) updates.push_back(a);
      else out.add(d, a);
    }
    for (const Action& u : updates) out.add(d, u);
  }
  return out;
}

}  // namespace

Schedule replicated_schedule(const Scheme& scheme, int stages, const std::vector<int>& units,
                             const GradientSync& sync) {
  const bool model = sync.scope == CollectiveScope::Model;
  if (units.size() > 1) {
    const Schedule joint = scheme.topology()->joint_schedule(stages, units);
    // Every stage's k-th update meets under a global clip or a tie: none may come before
    // another stage's last backward.
    if (joint.devices() > 0) return synchronize_updates(with_communication(model ? updates_last(joint) : joint), sync.scope);
  }
  if (units.size() == 1) {
    Schedule one = scheme.schedule(stages, units.front());
    // Lowered first: a schedule with an ALLREDUCE counts as carrying its communication.
    return sync.always || model ? synchronize_updates(with_communication(one), sync.scope) : one;
  }
  std::vector<Schedule> per_replica;
  for (const int n : units) {
    per_replica.push_back(n > 0 ? with_communication(scheme.schedule(stages, n))
                                : updates_only(scheme.schedule(stages, 1)));
  }
  Schedule out = replicate(per_replica);
  if (model) out.set_collective_scope(CollectiveScope::Model);
  return out;
}

bool clips_per_stage(const GradientOptions& options, const Scheme& scheme) {
  using Scope = GradientOptions::ClipScope;
  return options.clip_scope == Scope::PerStage || options.clip_scope == Scope::PerTensor ||
         (options.clip_scope == Scope::Auto && scheme.span() != Span::MiniBatch);
}

GradientSync gradient_sync(const GradientOptions& options, const Scheme& scheme, int stages, int replicas, bool ties,
                           bool ties_cross_stages) {
  const bool clip = options.clip_grad_norm.has_value();
  const bool sum_ties = ties && options.tied_gradients == GradientOptions::Tied::Sum;
  GradientSync sync;
  sync.always = replicas > 1 || clip || sum_ties;
  const bool global_clip = clip && !clips_per_stage(options, scheme) && stages > 1;
  if (global_clip || (sum_ties && ties_cross_stages)) sync.scope = CollectiveScope::Model;
  return sync;
}

std::vector<int> equal_units(int units, int replicas) {
  return std::vector<int>(static_cast<size_t>(std::max(replicas, 1)), units);
}

std::vector<int> replicated_placement(const Scheme& scheme, int stages, int replicas) {
  if (replicas > 1) {
    const std::vector<int> joint = scheme.topology()->joint_placement(stages, replicas);
    if (!joint.empty()) return joint;
  }
  const std::vector<int> one = scheme.placement(stages);
  const int devices = one.empty() ? 0 : *std::max_element(one.begin(), one.end()) + 1;
  std::vector<int> out;
  for (int r = 0; r < replicas; ++r) {
    for (const int d : one) out.push_back(r * devices + d);
  }
  return out;
}

ValidateOptions replicated_rules(const Scheme& scheme, int stages, int replicas, const GradientSync& sync) {
  ValidateOptions o = scheme.schedule_rules(stages);
  const bool all_reduce = replicas > 1 || sync.always || sync.scope == CollectiveScope::Model;
  if (all_reduce && !o.kinds.empty() &&
      std::find(o.kinds.begin(), o.kinds.end(), ActionKind::AllReduce) == o.kinds.end()) {
    o.kinds.push_back(ActionKind::AllReduce);
  }
  if (replicas <= 1) return o;
  const std::vector<int> one = o.max_in_flight;
  for (int r = 1; r < replicas && !one.empty(); ++r) o.max_in_flight.insert(o.max_in_flight.end(), one.begin(), one.end());
  return o;
}

Schedule replicated_stages_schedule(const std::vector<int>& counts, int units) {
  return synchronize_updates(lower(schedules::one_f_one_b_round_robin(counts, units)), CollectiveScope::Replicas);
}

std::vector<int> replicated_stages_placement(const std::vector<int>& counts) {
  std::vector<int> out(static_cast<size_t>(StageLayout(counts).stages()));
  for (size_t g = 0; g < out.size(); ++g) out[g] = static_cast<int>(g);
  return out;
}

ValidateOptions replicated_stages_rules(const Scheme& scheme, const std::vector<int>& counts) {
  ValidateOptions o = scheme.schedule_rules(static_cast<int>(counts.size()));
  if (!o.kinds.empty()) o.kinds.push_back(ActionKind::AllReduce);
  const StageLayout layout(counts);
  const std::vector<int> warmups = schedules::round_robin_warmups(counts);
  o.max_in_flight.clear();
  for (int g = 0; g < layout.stages(); ++g) o.max_in_flight.push_back(warmups[static_cast<size_t>(layout.position(g))] + 1);
  return o;
}

std::string replicas_refused(const Scheme& scheme, int replicas) {
  // Auxiliary heads (interlocking backpropagation's, DGL's) compute their losses as means
  // over what the stage sees, unscaled by the share of the mini-batch that the loss stage
  // applies: R replicas would sum R such means.
  if (replicas <= 1 || !scheme.add_ons()->prepares()) return "";
  return fmt::format("scheme {} trains auxiliary heads whose losses are means over each replica's share, so the "
                     "all-reduce would weigh them {} times",
                     scheme.type(), replicas);
}

}  // namespace pipelab
