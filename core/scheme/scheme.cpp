#include "core/scheme/scheme.h"


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
  o.coverage = Coverage::EveryStage;
  return o;
}

}  // namespace pipelab
