/// What the stages' gradients go through before each update (core/exec/gradient_finish.h):
/// the replicas' sum, tied weights and the gradient-norm clip of the optimizer section,
/// wired as one collective per group of stages that the ALLREDUCE before each U joins.
#include <algorithm>
#include <optional>

#include "core/scheme/replicas.h"
#include "core/train/runner.h"
#include "core/train/stage_costs.h"

namespace pipelab {
namespace {

/// Stage p's parameter named `name` ("<block>.<param>"), as (p, index in parameters()).
std::optional<std::pair<int, size_t>> find_parameter(const std::vector<Stage*>& stages, const std::string& name) {
  for (size_t p = 0; p < stages.size(); ++p) {
    size_t k = 0;
    for (const auto& kv : stages[p]->module().named_parameters()) {
      if (kv.key() == name) return std::make_pair(static_cast<int>(p), k);
      ++k;
    }
  }
  return std::nullopt;
}

}  // namespace

void Runner::tie_parameters() {
  const std::vector<Stage*> first_replica = replica_stages(0);
  for (const TiedParameter& tie : def_.ties) {
    const auto a = find_parameter(first_replica, tie.first), b = find_parameter(first_replica, tie.second);
    PIPELAB_ASSERT(a && b, "model {} ties {} and {}, which it does not have", e_.model->type(), tie.first, tie.second);
    ties_.push_back({a->first, a->second, b->first, b->second});
    // The second copy starts as the first (Megatron's setup all-reduce of the zeroed copy).
    at::NoGradGuard no_grad;
    for (int r = 0; r < plan_.replicas(); ++r) {
      const std::vector<Stage*> stages = replica_stages(r);
      const at::Tensor from = stages[static_cast<size_t>(a->first)]->parameters().at(a->second);
      at::Tensor to = stages[static_cast<size_t>(b->first)]->parameters().at(b->second);
      PIPELAB_ASSERT(from.sizes() == to.sizes(), "tied {} and {} have shapes {} and {}", tie.first, tie.second,
                     shape_text(from.sizes()), shape_text(to.sizes()));
      to.copy_(from);
    }
  }
}

std::vector<int64_t> Runner::cross_stage_tie_bytes() const {
  std::vector<int64_t> bytes(stages_.size(), 0);
  const int pipeline = plan_.stages();
  for (const GradientPlan::Tie& t : ties_) {
    if (t.first_stage == t.second_stage) continue;  // summed inside its stage, nothing moves
    for (size_t s = 0; s < stages_.size(); ++s) {
      const int p = static_cast<int>(s) % pipeline;  // replicas of whole pipelines: r * S + p
      if (p == t.first_stage) bytes[s] += tensor_bytes({stages_[s]->parameters().at(t.first)});
      if (p == t.second_stage) bytes[s] += tensor_bytes({stages_[s]->parameters().at(t.second)});
    }
  }
  return bytes;
}

void Runner::connect_gradients() {
  const GradientOptions& o = e_.gradients;
  if (o.clip_grad_norm && e_.run.amp == Amp::Fp16) {
    e_.source->fail("optimizer.clip_grad_norm",
                    "the clip would see fp16's loss-scaled gradients (they are unscaled inside each stage's step)",
                    "use run.amp: bf16 or none with a gradient clip");
  }
  bool cross = false;
  for (const GradientPlan::Tie& t : ties_) cross = cross || t.first_stage != t.second_stage;
  plan_ = RunPlan::compile(plan_request(cross));
  if (!plan_.sync().always) return;
  GradientPlan rules;
  rules.sum_ties = o.tied_gradients == GradientOptions::Tied::Sum;
  rules.clip_max_norm = o.clip_grad_norm.value_or(0.0);
  rules.clip_norm_type = o.norm_type();
  rules.clip_per_stage = clips_per_stage(o, *e_.scheme);
  rules.clip_per_tensor = o.clip_scope == GradientOptions::ClipScope::PerTensor;
  const int stages = plan_.stages();
  // One collective per group of stages: all of them, or each stage's replicas.
  const bool model = plan_.sync().scope == CollectiveScope::Model;
  const StageLayout layout = plan_.layout().replicated() ? plan_.layout() : StageLayout::uniform(stages, 1);
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
    for (const GradientPlan::Tie& t : ties_) {
      if (model || (t.first_stage == group && t.second_stage == group)) plan.ties.push_back(t);
    }
    const std::shared_ptr<AllReduce> collective = e_.executor->world().all_reduce(plan);
    for (size_t m = 0; m < slots.size(); ++m) {
      StageSlot& slot = slots_[slots[m]];
      collective->add_rank(static_cast<int>(m), slot.stage->parameters());
      slot.all_reduce = collective;
      slot.replica = static_cast<int>(m);
    }
  }
}

}  // namespace pipelab
