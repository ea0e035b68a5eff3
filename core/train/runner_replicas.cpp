/// Replicas of the pipeline (`partition.replicas`; core/schedule/replicate.h): building each
/// replica's stages, their all-reduces, and the replicated training schedules.
#include <fmt/format.h>

#include "core/schedule/lower.h"
#include "core/schedule/schedule.h"
#include "core/scheme/replicas.h"
#include "core/train/feeds.h"
#include "core/train/runner.h"

namespace pipelab {

int Runner::checked_replicas(int stages) const {
  const int requested = e_.partition.replicas;
  const int replicas = e_.scheme->replicas(requested);
  if (requested != 1 && replicas != requested) {
    e_.source->fail("partition.replicas",
                    fmt::format("scheme {} sets its own replicas ({}), and partition.replicas asks for {}",
                                e_.scheme->type(), replicas, requested),
                    "set the replicas in one place");
  }
  const std::string refused = replicas_refused(*e_.scheme, replicas);
  if (!refused.empty()) e_.source->fail("partition.replicas", refused, "use partition.replicas: 1");
  if (static_cast<int64_t>(stages) * replicas >= kMaxScheduleStages) {
    e_.source->fail("partition.replicas",
                    fmt::format("{} stages x {} replicas is too many (fewer than {} in all)", stages, replicas,
                                kMaxScheduleStages),
                    "use fewer replicas");
  }
  return replicas;
}

void Runner::build_replica(int r, std::vector<Block> blocks, const std::vector<c10::Device>& devices) {
  const RunOptions& run = e_.run;
  const int stages = pipeline_stages_;
  size_t next = 0;
  for (int p = 0; p < stages; ++p) {
    const size_t g = static_cast<size_t>(r * stages + p);
    StageSpec spec;
    spec.index = p;
    spec.count = stages;
    spec.replica = r;
    spec.first_block = next;
    spec.inputs = dataflow_.live[next];
    for (int k = 0; k < balance_[static_cast<size_t>(p)]; ++k) spec.blocks.push_back(std::move(blocks[next++]));
    spec.outputs = dataflow_.live[next];
    spec.loss = p + 1 == stages ? def_.loss : nullptr;
    spec.device = devices.size() == 1 ? devices[0] : devices[static_cast<size_t>(placement_[g])];
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
  for (int p = 0; p < pipeline_stages_; ++p) out.push_back(stages_[static_cast<size_t>(r * pipeline_stages_ + p)].get());
  return out;
}

std::vector<int> Runner::replica_units(int64_t n) const {
  std::vector<int> units;
  for (const auto& sizes : replica_chunk_sizes(n, replicas_, e_.scheme->micro_batches())) {
    units.push_back(static_cast<int>(sizes.size()));
  }
  return units;
}

const Schedule& Runner::train_schedule(const std::vector<int>& units) {
  auto it = schedules_.find(units);
  if (it == schedules_.end()) {
    it = schedules_.emplace(units, with_communication(replicated_schedule(*e_.scheme, pipeline_stages_, units, sync_))).first;
  }
  return it->second;
}

}  // namespace pipelab
