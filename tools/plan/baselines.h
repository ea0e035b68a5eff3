#pragma once
/// The two plans every pipeline is judged against, shown whether or not they rank: the
/// model on one device (`single`) and plain data parallelism on all N (`dp`), what a
/// Megatron or torchtitan user runs when the model fits; and the verdict "don't pipeline"
/// when the best plan is not faster than them by a margin (docs/plan.md, "Baselines").
#include <optional>
#include <string>

#include "tools/plan/planner.h"

namespace pipelab::plan {

/// A baseline and where it stands: its rank in the search's table ("#3"), or why it is not
/// there ("not searched: one device leaves N - 1 idle", "does not fit: needs 95 GiB").
struct Baseline {
  Candidate candidate;
  std::string standing;
  bool fits = true;
};

struct Baselines {
  std::optional<Baseline> single, dp;
  std::string verdict;  ///< "pipeline: ...", or "don't pipeline: ... (why)"
};

/// The share by which the best plan must beat a baseline's step to be worth pipelining.
constexpr double kPipelineMargin = 0.05;

/// Replays `single` and `dp` on `space.devices` devices (under the same costs and memory
/// cap) and judges `result`'s best plan against them.
Baselines judge_baselines(const Experiment& e, const PlanSpace& space, const CostsOf& costs_of,
                          const PlanResult& result);

}  // namespace pipelab::plan
