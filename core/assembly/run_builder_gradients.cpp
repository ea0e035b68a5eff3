/// What the stages' gradients go through before each update (core/comm/gradient_finish.h):
/// the replicas' sum, tied weights and the gradient-norm clip of the optimizer section,
/// wired as one collective per group of stages that the ALLREDUCE before each U joins.
#include <algorithm>
#include <optional>

#include "core/assembly/run_builder.h"
#include "core/experiment/plan_request.h"
#include "core/records/stage_costs.h"
#include "core/scheme/replicas.h"

namespace pipelab {

PlanRequest RunBuilder::plan_request(std::optional<bool> ties_cross_stages) const {
  PlanRequest r = ::pipelab::plan_request(e_);
  r.tied_weights = !p_->def.ties.empty();
  r.ties_cross_stages = ties_cross_stages;
  return r;
}

void RunBuilder::connect_gradients() {
  const GradientOptions& o = e_.gradients;
  if (o.clip_grad_norm && e_.run.amp == Amp::Fp16) {
    e_.source->fail("optimizer.clip_grad_norm",
                    "the clip would see fp16's loss-scaled gradients (they are unscaled inside each stage's step)",
                    "use run.amp: bf16 or none with a gradient clip");
  }
  bool cross = false;
  for (const GradientPlan::Tie& t : p_->ties) cross = cross || t.first_stage != t.second_stage;
  p_->plan = RunPlan::compile(plan_request(cross));
  if (!p_->plan.sync().always) return;
  GradientPlan rules;
  rules.sum_ties = o.tied_gradients == GradientOptions::Tied::Sum;
  rules.clip_max_norm = o.clip_grad_norm.value_or(0.0);
  rules.clip_norm_type = o.norm_type();
  rules.clip_per_stage = clips_per_stage(o, *e_.scheme);
  rules.clip_per_tensor = o.clip_scope == GradientOptions::ClipScope::PerTensor;
  const int stages = p_->plan.stages();
  // One collective per group of stages: all of them, or each stage's replicas.
  const bool model = p_->plan.sync().scope == CollectiveScope::Model;
  const StageLayout layout = p_->plan.layout().replicated() ? p_->plan.layout() : StageLayout::uniform(stages, 1);
  for (int group = 0; group < (model ? 1 : stages); ++group) {
    GradientPlan plan = rules;
    // PipeDream's replicated stages average (DDP); whole pipelines sum their shares.
    plan.average = !layout.uniform();
    std::vector<size_t> slots;
    for (int g = 0; g < layout.stages(); ++g) {
      if (!model && layout.position(g) != group) continue;
      plan.members.push_back({layout.position(g), layout.replica(g)});
      slots.push_back(static_cast<size_t>(g));
    }
    for (const GradientPlan::Tie& t : p_->ties) {
      if (model || (t.first_stage == group && t.second_stage == group)) plan.ties.push_back(t);
    }
    const std::shared_ptr<AllReduce> collective = e_.executor->world().all_reduce(plan);
    for (size_t m = 0; m < slots.size(); ++m) {
      StageSlot& slot = p_->slots[slots[m]];
      collective->add_rank(static_cast<int>(m), slot.stage->parameters());
      slot.all_reduce = collective;
      slot.replica = static_cast<int>(m);
    }
  }
}

}  // namespace pipelab
