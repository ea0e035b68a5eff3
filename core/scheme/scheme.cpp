#include "core/scheme/scheme.h"

#include <fmt/format.h>

namespace pipelab {

std::vector<int> Scheme::placement(int stages) const {
  std::vector<int> out;
  for (int r = 0; r < stages; ++r) out.push_back(r);
  return out;
}

std::string Scheme::replicated_stages_refused() const {
  return fmt::format("replicated stages are PipeDream's: its 1F1B-RR deals whole mini-batches round robin to the "
                     "replicas of a stage under weight stashing, and scheme {} defines no such schedule",
                     type());
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
