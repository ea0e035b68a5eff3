#include "core/records/cost_record.h"

#include <fmt/format.h>

namespace pipelab {

const std::vector<KindCostKeys>& kind_cost_keys() {
  static const std::vector<KindCostKeys> keys = [] {
    std::vector<KindCostKeys> out;
    for (const ActionKindInfo& k : action_kinds()) {
      if (k.role != KindRole::Compute) continue;
      const std::string share = k.cost_share == 0.5 ? "half" : fmt::format("{}", k.cost_share);
      const std::string fallback =
          k.cost_fallback == k.kind ? "" : fmt::format(" (0: {} of {})", share, kind_info(k.cost_fallback).name);
      out.push_back({k.kind, k.cost_key, std::string(k.cost_key) + "_transient_bytes",
                     fmt::format("seconds of one {}{}", k.name, fallback),
                     fmt::format("bytes a {} needs while it runs", k.name)});
    }
    return out;
  }();
  return keys;
}

}  // namespace pipelab
