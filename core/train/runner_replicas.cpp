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

int Runner::checked_replicas(int stages) {
  const Replicas& asked = e_.partition.replicas;
  if (!asked.per_stage.empty()) {
    check_replicated_stages(stages);
    layout_ = StageLayout(asked.per_stage);
    return 1;
  }
  const int requested = asked.count;
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
  layout_ = replicas > 1 ? StageLayout::uniform(stages, replicas) : StageLayout();
  return replicas;
}

void Runner::check_replicated_stages(int stages) const {
  const std::vector<int>& counts = e_.partition.replicas.per_stage;
  const std::string key = "partition.replicas";
  if (static_cast<int>(counts.size()) != stages) {
    e_.source->fail(key, fmt::format("{} replica counts for {} pipeline stages", counts.size(), stages),
                    fmt::format("give one count per stage (a list of {})", stages));
  }
  const std::string refused = e_.scheme->replicated_stages_refused();
  if (!refused.empty()) {
    e_.source->fail(key, fmt::format("scheme {} cannot run replicated stages: {}", e_.scheme->type(), refused),
                    "give one count (copies of the whole pipeline), or use scheme: {type: pipedream} with its "
                    "defaults");
  }
  int64_t total = 0;
  for (const int c : counts) total += c;
  if (total >= kMaxScheduleStages) {
    e_.source->fail(key, fmt::format("{} stages in all is too many (fewer than {})", total, kMaxScheduleStages),
                    "use fewer replicas");
  }
  if (e_.scheme->span() == Span::MiniBatch) {
    e_.source->fail(key, fmt::format("scheme {} flushes every mini-batch, and replicated stages deal whole "
                                     "mini-batches round robin",
                                     e_.scheme->type()),
                    "give one count (copies of the whole pipeline)");
  }
  if (e_.scheme->span() == Span::Run) {
    // The epoch snapshots of a never-flushed pipeline are taken by replica 0, which does not
    // see every epoch's last mini-batch when the stage deals them round robin.
    e_.source->fail("scheme.flush", "replicated stages run one pipeline per epoch (flush: never is not modelled)",
                    "use flush: epoch with replicated stages");
  }
  if (!e_.executor->world().process_name().empty()) {
    e_.source->fail(key, "replicated stages run in one process (threaded or sequential executor) for now",
                    "use run.executor: threaded, or one count per stage");
  }
  const GradientOptions& g = e_.gradients;
  if (g.clip_grad_norm || !def_.ties.empty()) {
    e_.source->fail(key,
                    fmt::format("replicated stages update at different times, so {} has no one moment to meet",
                                g.clip_grad_norm ? "optimizer.clip_grad_norm" : "the model's tied weights"),
                    "give one count per stage, or train without the clip and the ties");
  }
}

void Runner::build_replica(int r, std::vector<Block> blocks, const std::vector<c10::Device>& devices) {
  const RunOptions& run = e_.run;
  const int stages = pipeline_stages_;
  size_t next = 0;
  for (int p = 0; p < stages; ++p) {
    const size_t first = next;
    next += static_cast<size_t>(balance_[static_cast<size_t>(p)]);
    // Stages are numbered replica by replica (core/schedule/stage_layout.h); a replicated
    // stage's row r holds only the stages with more than r replicas.
    const int id = layout_.stage(p, r);  // the default layout: stage p (replica 0 only)
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
    spec.device = devices.size() == 1 ? devices[0] : devices[static_cast<size_t>(placement_[static_cast<size_t>(id)])];
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
  for (int p = 0; p < pipeline_stages_; ++p) {
    // A replicated stage with fewer copies than `r` + 1 gives its last one.
    const int copies = layout_.replicated() ? layout_.counts()[static_cast<size_t>(p)] : 1;
    const int id = layout_.stage(p, std::min(r, copies - 1));
    out.push_back(stages_[static_cast<size_t>(id)].get());
  }
  return out;
}

std::vector<int> Runner::replica_units(int64_t n) const {
  std::vector<int> units;
  for (const auto& sizes : replica_chunk_sizes(n, replicas_, e_.scheme->micro_batches())) {
    units.push_back(static_cast<int>(sizes.size()));
  }
  return units;
}

Schedule Runner::training_schedule(const std::vector<int>& units) const {
  if (layout_.uniform()) return with_communication(replicated_schedule(*e_.scheme, pipeline_stages_, units, sync_));
  // Replicated stages: one pipeline whose stages deal the mini-batches round robin.
  int total = 0;
  for (const int n : units) total += n;
  return replicated_stages_schedule(layout_.counts(), total);
}

const Schedule& Runner::train_schedule(const std::vector<int>& units) {
  auto it = schedules_.find(units);
  if (it == schedules_.end()) it = schedules_.emplace(units, training_schedule(units)).first;
  return it->second;
}

}  // namespace pipelab
