/// Replicas of the pipeline (`partition.replicas`; core/schedule/replicate.h): building each
/// replica's stages, their all-reduces, and the replicated training schedules.
#include <fmt/format.h>

#include <algorithm>

#include "core/schedule/lower.h"
#include "core/schedule/schedule.h"
#include "core/scheme/replicas.h"
#include "core/train/feeds.h"
#include "core/train/runner.h"

namespace pipelab {

PlanRequest Runner::plan_request(std::optional<bool> ties_cross_stages) const {
  PlanRequest r = ::pipelab::plan_request(e_);
  r.tied_weights = !def_.ties.empty();
  r.ties_cross_stages = ties_cross_stages;
  return r;
}

void Runner::build_replica(int r, std::vector<Block> blocks, const std::vector<c10::Device>& devices) {
  const RunOptions& run = e_.run;
  const int stages = plan_.stages();
  size_t next = 0;
  for (int p = 0; p < stages; ++p) {
    const size_t first = next;
    next += static_cast<size_t>(balance_[static_cast<size_t>(p)]);
    // Stages are numbered replica by replica (core/schedule/stage_layout.h); a replicated
    // stage's row r holds only the stages with more than r replicas.
    const int id = plan_.layout().stage(p, r);  // the default layout: stage p (replica 0 only)
    if (id < 0) continue;
    PIPELAB_ASSERT(static_cast<size_t>(id) == stages_.size(), "stage ({}, {}) built as {} of {}", p, r, stages_.size(),
                   id);
    StageSpec spec;
    spec.index = p;
    spec.count = stages;
    spec.replica = r;
    spec.first_block = first;
    spec.inputs = dataflow_.live[first];
    for (size_t k = first; k < next; ++k) spec.blocks.push_back(std::move(blocks[k]));
    spec.outputs = dataflow_.live[next];
    spec.loss = p + 1 == stages ? def_.loss : nullptr;
    spec.device =
        devices.size() == 1 ? devices[0] : devices[static_cast<size_t>(plan_.placement()[static_cast<size_t>(id)])];
    spec.seed = static_cast<uint64_t>(run.seed);
    spec.precision = {run.amp, run.loss_scale};
    spec.channels_last = run.channels_last;
    auto stage = std::make_unique<Stage>(std::move(spec));
    if (dtype_ != at::kFloat) stage->module().to(dtype_);
    stages_.push_back(std::move(stage));
  }
}

std::vector<Stage*> Runner::replica_stages(int r) const {
  std::vector<Stage*> out;
  for (int p = 0; p < plan_.stages(); ++p) {
    // A replicated stage with fewer copies than `r` + 1 gives its last one.
    const int copies = plan_.layout().replicated() ? plan_.layout().counts()[static_cast<size_t>(p)] : 1;
    const int id = plan_.layout().stage(p, std::min(r, copies - 1));
    out.push_back(stages_[static_cast<size_t>(id)].get());
  }
  return out;
}

const Schedule& Runner::train_schedule(const std::vector<int>& units) {
  auto it = schedules_.find(units);
  if (it == schedules_.end()) it = schedules_.emplace(units, plan_.training(units)).first;
  return it->second;
}

}  // namespace pipelab
