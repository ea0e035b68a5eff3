#pragma once
// What the tests that run `pipelab plan`'s candidates share (plan_memory_test.cpp,
// plan_ranking_test.cpp), as tools/bench/validate_plan.py runs them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <string>

namespace pipelab::testing {

/// The `pipelab run` flags that run candidate `c` of `pipelab plan --json`: its scheme
/// section, stages, replicas (1 when the scheme holds its own), partition and recomputed stages.
inline std::string plan_candidate_flags(const nlohmann::json& c) {
  const std::string scheme = c["scheme"].get<std::string>();
  const bool own_replicas = scheme.find("replicas") != std::string::npos;
  std::string balance;
  for (const auto& b : c["balance"]) balance += (balance.empty() ? "" : ", ") + std::to_string(b.get<int>());
  std::string recompute;
  for (const auto& s : c["recompute"]) recompute += (recompute.empty() ? "" : ", ") + std::to_string(s.get<int>());
  return fmt::format("--set 'scheme={}' --set partition.stages={} --set partition.replicas={} "
                     "--set 'partition.balance=[{}]'{}",
                     scheme, c["stages"].get<int>(), own_replicas ? 1 : c["replicas"].get<int>(), balance,
                     recompute.empty() ? "" : fmt::format(" --set 'partition.recompute=[{}]'", recompute));
}

}  // namespace pipelab::testing
