/// What a built run is made of (core/assembly/run_parts.h): its views of the stages.
#include "core/assembly/run_parts.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/feed/shadow_sync.h"
#include "core/model/model.h"
#include "core/records/stage_costs.h"

namespace pipelab {

RunParts::RunParts() = default;
RunParts::~RunParts() = default;  // here, where ShadowSync is complete

std::vector<Stage*> RunParts::all_stages() const {
  std::vector<Stage*> out;
  for (const auto& s : stages) out.push_back(s.get());
  return out;
}

std::vector<StagePolicy*> RunParts::all_policies() const {
  std::vector<StagePolicy*> out;
  for (const auto& p : policies) out.push_back(p.get());
  return out;
}

std::vector<Stage*> RunParts::replica_stages(int r) const {
  std::vector<Stage*> out;
  for (const int id : plan.replica_view(r)) out.push_back(stages[static_cast<size_t>(id)].get());
  return out;
}

at::Tensor RunParts::sample_inputs(int64_t n) const {
  std::vector<int64_t> index(static_cast<size_t>(std::min<int64_t>(n, data.train->size())));
  std::iota(index.begin(), index.end(), 0);
  const at::Tensor x = data.train->get(index, 0).x;
  return data.spec.integer_input ? x : x.to(dtype);
}

std::pair<int64_t, int64_t> RunParts::parameter_counts() const {
  int64_t model = 0;
  for (Stage* s : replica_stages(0)) model += count_parameters(s->module());
  for (const GradientPlan::Tie& t : ties) {
    if (t.first_stage != t.second_stage) model -= stages.at(static_cast<size_t>(t.second_stage))->parameters().at(t.second).numel();
  }
  std::map<int, int64_t> per_device;
  const std::vector<int>& placement = plan.placement();
  for (size_t s = 0; s < stages.size(); ++s) {
    const int device = s < placement.size() ? placement[s] : 0;
    per_device[device] += count_parameters(stages[s]->module());
  }
  int64_t resident = 0;
  for (const auto& [device, count] : per_device) resident = std::max(resident, count);
  return {model, resident};
}

std::vector<int64_t> RunParts::cross_stage_tie_bytes() const {
  std::vector<int64_t> bytes(stages.size(), 0);
  const int pipeline = plan.stages();
  for (const GradientPlan::Tie& t : ties) {
    if (t.first_stage == t.second_stage) continue;  // summed inside its stage, nothing moves
    for (size_t s = 0; s < stages.size(); ++s) {
      const int p = static_cast<int>(s) % pipeline;  // replicas of whole pipelines: r * S + p
      if (p == t.first_stage) bytes[s] += tensor_bytes({stages[s]->parameters().at(t.first)});
      if (p == t.second_stage) bytes[s] += tensor_bytes({stages[s]->parameters().at(t.second)});
    }
  }
  return bytes;
}

}  // namespace pipelab
