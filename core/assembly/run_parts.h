#pragma once
/// What a run is made of once built (core/assembly/run_builder.h): the data and its loaders, the
/// model's stages with their policies, routes and slots, the boundaries' codecs, the shadow
/// and the run plan. The step loop, the checkpoints and the recorder read it; only the
/// builder makes it. It stays where it was made (stages' learning-rate schedules point at it).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/gradient_finish.h"
#include "core/compress/compression.h"
#include "core/data/loader.h"
#include "core/exec/executor.h"
#include "core/model/model.h"
#include "core/plan/run_plan.h"

namespace pipelab {

class ShadowSync;

struct RunParts {
  RunParts();
  ~RunParts();
  RunParts(const RunParts&) = delete;
  RunParts& operator=(const RunParts&) = delete;

  at::ScalarType dtype = at::kFloat;
  DatasetSplits data;
  ModelDef def;
  Dataflow dataflow;  ///< the model's live sets, checked before anything is built
  std::vector<int> balance;
  /// The run plan: stages, replicas or replicated stages, placement, gradient sync, and the
  /// schedules every step runs.
  RunPlan plan;
  /// Replica r's copy of pipeline stage p is stages[r * plan.stages() + p] (with replicated
  /// stages, as plan.layout() numbers them).
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<std::unique_ptr<GradientRoute>> routes;  ///< per stage; null: end-to-end
  std::vector<StageSlot> slots;
  /// The boundaries' codecs (core/compress/compression.h); null without compression.
  std::unique_ptr<BoundaryCodecs> codecs;
  std::unique_ptr<ShadowSync> shadow;  ///< null unless run.shadow: sync
  std::unique_ptr<DataLoader> train, test;
  std::vector<GradientPlan::Tie> ties;  ///< the model's tied parameters, by pipeline stage
  /// The learning rate at a global step (optimizer.lr times the schedule's factor).
  std::function<double(int64_t)> lr_at;
  std::string init_report;    ///< what a non-strict init.from left out (logged when the run starts)
  std::string limits_report;  ///< dataset.limit, dataset.test_limit and run.max_steps, when set

  std::vector<Stage*> all_stages() const;
  std::vector<StagePolicy*> all_policies() const;
  /// Replica r's copy of every pipeline stage (RunPlan::replica_view); replica 0 is the model.
  std::vector<Stage*> replica_stages(int r) const;
  int stage_count() const { return static_cast<int>(stages.size()); }
  /// The model's parameters (replica 0's stages, a weight tied across two stages counted
  /// once) and the most one device holds (every stage copy placed on it).
  std::pair<int64_t, int64_t> parameter_counts() const;
  /// Per stage, the bytes of its parameters tied to another pipeline stage's (costs.json).
  std::vector<int64_t> cross_stage_tie_bytes() const;
  /// The first `n` training examples' inputs (at most the training set), in the run's dtype.
  at::Tensor sample_inputs(int64_t n) const;
};

}  // namespace pipelab
