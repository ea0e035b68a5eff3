#include "core/scheme/scheme_parts.h"

#include <fmt/format.h>

namespace pipelab {

std::string ReplicaTopology::replicated_stages_refused(const std::string& scheme) const {
  return fmt::format("replicated stages are PipeDream's: its 1F1B-RR deals whole mini-batches round robin to the "
                     "replicas of a stage under weight stashing, and scheme {} defines no such schedule",
                     scheme);
}

std::shared_ptr<const ReplicaTopology> default_topology() {
  static const auto topology = std::make_shared<const ReplicaTopology>();
  return topology;
}

std::shared_ptr<const StageAddOns> no_add_ons() {
  static const auto none = std::make_shared<const StageAddOns>();
  return none;
}

}  // namespace pipelab
