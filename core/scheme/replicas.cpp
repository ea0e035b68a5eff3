#include "core/scheme/replicas.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/schedule/lower.h"
#include "core/schedule/replicate.h"

namespace pipelab {

Schedule replicated_schedule(const Scheme& scheme, int stages, const std::vector<int>& units) {
  if (units.size() == 1) return scheme.schedule(stages, units.front());
  std::vector<Schedule> per_replica;
  for (const int n : units) {
    per_replica.push_back(n > 0 ? with_communication(scheme.schedule(stages, n))
                                : updates_only(scheme.schedule(stages, 1)));
  }
  return replicate(per_replica);
}

std::vector<int> equal_units(int units, int replicas) {
  return std::vector<int>(static_cast<size_t>(std::max(replicas, 1)), units);
}

std::vector<int> replicated_placement(const Scheme& scheme, int stages, int replicas) {
  const std::vector<int> one = scheme.placement(stages);
  const int devices = one.empty() ? 0 : *std::max_element(one.begin(), one.end()) + 1;
  std::vector<int> out;
  for (int r = 0; r < replicas; ++r) {
    for (const int d : one) out.push_back(r * devices + d);
  }
  return out;
}

ValidateOptions replicated_rules(const Scheme& scheme, int stages, int replicas) {
  ValidateOptions o = scheme.schedule_rules(stages);
  if (replicas <= 1) return o;
  if (!o.kinds.empty() && std::find(o.kinds.begin(), o.kinds.end(), ActionKind::AllReduce) == o.kinds.end()) {
    o.kinds.push_back(ActionKind::AllReduce);
  }
  const std::vector<int> one = o.max_in_flight;
  for (int r = 1; r < replicas && !one.empty(); ++r) o.max_in_flight.insert(o.max_in_flight.end(), one.begin(), one.end());
  return o;
}

std::string replicas_refused(const Scheme& scheme, int replicas) {
  if (replicas <= 1 || scheme.span() == Span::MiniBatch) return "";
  return fmt::format("scheme {} pipelines across mini-batches (its weights are asynchronous), and replicas of it "
                     "are not supported yet: what each replica's staleness would be is not defined",
                     scheme.type());
}

}  // namespace pipelab
