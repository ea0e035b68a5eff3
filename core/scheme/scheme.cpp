#include "core/scheme/scheme.h"

#include "core/exec/collective.h"

namespace pipelab {

Message StagePolicy::head(Stage& stage, int mb) {
  PIPELAB_ASSERT(false, "stage {}: the schedule has an H action for micro-batch {}, but the scheme's policy has no head",
                 stage.index(), mb);
  return {};
}

std::vector<int> Scheme::placement(int stages) const {
  std::vector<int> out;
  for (int r = 0; r < stages; ++r) out.push_back(r);
  return out;
}

ValidateOptions Scheme::schedule_rules(int stages) const {
  ValidateOptions o;
  o.max_in_flight = max_in_flight(stages);
  o.kinds = {ActionKind::Forward, ActionKind::Backward, ActionKind::BackwardInput, ActionKind::BackwardWeight,
             ActionKind::Update};
  o.training = true;
  o.coverage = topology() == Topology::Replicas ? Coverage::OneStage : Coverage::EveryStage;
  return o;
}

std::shared_ptr<AllReduce> Scheme::make_all_reduce(int ranks) const {
  return all_reduce_ ? all_reduce_(ranks) : std::make_shared<LocalAllReduce>(ranks);
}

}  // namespace pipelab
