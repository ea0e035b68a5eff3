#pragma once
// What the tests that run `pipelab plan`'s candidates share (plan_memory_test.cpp,
// plan_ranking_test.cpp), as tools/bench/validate_plan.py runs them, and the model whose
// recomputed stages they and stage_recompute_test.cpp measure.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <string>

namespace pipelab::testing {

/// 1F1B on four stages of an MLP whose activations outweigh its weights (micro-batches of
/// 128 through 64-wide layers): the first stage holds four micro-batches' activations, the
/// last one; what recomputing a stage frees shows in its device's peak.
inline const char* const kDeepMlp = R"(
model:     {type: mlp, sizes: [32, 64, 64, 64, 64, 64, 64, 64, 8]}
dataset:   {type: synthetic, samples: 2048, test_samples: 16, shape: [32], classes: 8}
partition: {stages: 4}
scheme:    {type: pipedream_flush, chunks: 8}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 1024, seed: 0, threads: 1, progress: false}
)";

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
