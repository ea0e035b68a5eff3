#include "core/scheme/scheme.h"

#include <fmt/format.h>

namespace pipelab {

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
