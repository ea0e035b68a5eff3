#include "core/comm/gradient_finish.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "core/util/error.h"

namespace pipelab {
namespace {

using StageGrads = std::map<int, std::vector<at::Tensor>>;  // pipeline stage -> its gradients

/// Step 1: each pipeline stage's gradients summed over its replicas, in replica order.
StageGrads sum_replicas(const std::vector<std::vector<at::Tensor>>& grads, const GradientPlan& plan) {
  std::map<int, std::map<int, size_t>> members;  // stage -> replica -> member
  for (size_t m = 0; m < plan.members.size(); ++m) members[plan.members[m].stage][plan.members[m].replica] = m;
  StageGrads out;
  for (const auto& [stage, by_replica] : members) {
    std::vector<at::Tensor>& sums = out[stage];
    for (const auto& [replica, m] : by_replica) {
      const std::vector<at::Tensor>& g = grads.at(m);
      if (sums.empty()) sums.resize(g.size());
      PIPELAB_ASSERT(g.size() == sums.size(), "replicas of stage {} have {} and {} parameters", stage, sums.size(),
                     g.size());
      for (size_t k = 0; k < g.size(); ++k) {
        if (!g[k].defined()) continue;
        // Into the sum's own copy: a new tensor per replica would hold two at once.
        if (sums[k].defined()) {
          sums[k].add_(g[k]);
        } else {
          sums[k] = g[k].clone();
        }
      }
    }
    // Over every replica, also one that brought no gradient this round.
    if (!plan.average || by_replica.size() < 2) continue;
    for (at::Tensor& t : sums) {
      if (t.defined()) t.div_(static_cast<double>(by_replica.size()));
    }
  }
  return out;
}

/// Step 2: both copies of each tied parameter get the sum of their gradients.
void sum_ties(StageGrads& grads, const GradientPlan& plan) {
  for (const GradientPlan::Tie& t : plan.ties) {
    if (!grads.count(t.first_stage) || !grads.count(t.second_stage)) continue;
    at::Tensor& a = grads[t.first_stage].at(t.first);
    at::Tensor& b = grads[t.second_stage].at(t.second);
    const at::Tensor sum = a.defined() && b.defined() ? a + b : a.defined() ? a : b;
    a = sum;
    b = sum.clone();
  }
}

/// Step 3 for one group of stages: torch's get_total_norm and clip_grads_with_norm_.
void clip(StageGrads& grads, const std::vector<int>& stages, const GradientPlan& plan) {
  std::vector<std::pair<int, size_t>> second;  // ties' second copies, counted once
  if (plan.sum_ties) {
    for (const GradientPlan::Tie& t : plan.ties) second.emplace_back(t.second_stage, t.second);
  }
  std::vector<at::Tensor> norms;
  std::vector<at::Tensor*> clipped;
  for (const int stage : stages) {
    std::vector<at::Tensor>& g = grads.at(stage);
    for (size_t k = 0; k < g.size(); ++k) {
      if (!g[k].defined()) continue;
      clipped.push_back(&g[k]);
      if (std::find(second.begin(), second.end(), std::make_pair(stage, k)) != second.end()) continue;
      norms.push_back(at::linalg_vector_norm(g[k], plan.clip_norm_type));
    }
  }
  if (norms.empty()) return;
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), plan.clip_norm_type);
  // torch writes max_norm / (total + 1e-6), which a tensor evaluates as reciprocal() * max_norm.
  const at::Tensor coefficient = at::clamp_max((total + 1e-6).reciprocal() * plan.clip_max_norm, 1.0);
  for (at::Tensor* g : clipped) *g = *g * coefficient;
}

}  // namespace

GradientPlan GradientPlan::replicas_of(int stage, int replicas) {
  GradientPlan plan;
  for (int r = 0; r < replicas; ++r) plan.members.push_back({stage, r});
  return plan;
}

std::vector<std::vector<at::Tensor>> finish_gradients(const std::vector<std::vector<at::Tensor>>& grads,
                                                       const GradientPlan& plan) {
  PIPELAB_ASSERT(grads.size() == plan.members.size(), "{} members' gradients for a plan of {}", grads.size(),
                 plan.members.size());
  at::NoGradGuard no_grad;
  StageGrads sums = sum_replicas(grads, plan);
  if (plan.sum_ties) sum_ties(sums, plan);
  if (plan.clip_max_norm > 0) {
    std::vector<int> all;
    for (const auto& kv : sums) all.push_back(kv.first);
    if (plan.clip_per_tensor) {
      for (auto& [stage, grads] : sums) {
        for (at::Tensor& g : grads) {
          if (!g.defined()) continue;
          StageGrads one{{stage, {g}}};
          clip(one, {stage}, plan);
          g = one.at(stage).front();
        }
      }
    } else if (plan.clip_per_stage) {
      for (const int stage : all) clip(sums, {stage}, plan);
    } else {
      clip(sums, all, plan);
    }
  }
  std::vector<std::vector<at::Tensor>> out;
  for (const GradientPlan::Member& m : plan.members) out.push_back(sums.at(m.stage));
  return out;
}

}  // namespace pipelab
