#pragma once
/// Which copy of which pipeline stage each model stage of a schedule is (docs/design.md,
/// "Placement"). A pipeline of S stages (positions) whose position p has R_p replicas:
/// R_p all equal is data parallelism over whole pipelines (Megatron-LM's and DeepSpeed's
/// pipeline x data parallelism); unequal counts are PipeDream's replicated stages (SOSP'19
/// section 3.2, its "2-1-1" configurations). The model stages are numbered replica by replica:
/// replica 0 of every position, then replica 1 of every position that has one, and so on, so
/// that with R equal counts replica r's stage p is r * S + p.
#include <utility>
#include <vector>

namespace pipelab {

class StageLayout {
 public:
  /// No replicas: every model stage is its own position (a plain, or interleaved, pipeline).
  StageLayout() = default;
  /// `counts[p]`: the replicas of position p (each at least 1).
  explicit StageLayout(std::vector<int> counts);
  /// `positions` positions with `replicas` replicas each.
  static StageLayout uniform(int positions, int replicas);

  /// False for the default layout (one replica, positions = stages).
  bool replicated() const { return !counts_.empty(); }
  /// Whether every position has as many replicas (data parallelism over whole pipelines).
  bool uniform() const { return uniform_; }
  const std::vector<int>& counts() const { return counts_; }
  /// Model stages in all (0 for the default layout, which holds any number).
  int stages() const { return static_cast<int>(where_.size()); }
  /// The most replicas of any position (1 for the default layout).
  int max_replicas() const { return max_; }
  /// Position and replica of model stage `stage` (the stage itself and 0 by default).
  int position(int stage) const;
  int replica(int stage) const;
  /// The model stage of `replica` of `position` (-1 when the position has fewer replicas).
  int stage(int position, int replica) const;

  bool operator==(const StageLayout& o) const { return counts_ == o.counts_; }

 private:
  std::vector<int> counts_;
  std::vector<std::pair<int, int>> where_;  ///< per model stage: (position, replica)
  std::vector<std::vector<int>> ids_;       ///< [position][replica] -> model stage
  bool uniform_ = true;
  int max_ = 1;
};

}  // namespace pipelab
