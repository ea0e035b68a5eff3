#include "core/plan/run_plan.h"

#include "core/plan/offload_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/config/config_node.h"
#include "core/schedule/lower.h"
#include "core/scheme/scheme_parts.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

const char* const kReplicas = "partition.replicas";

/// Copies of the whole pipeline: the scheme's own (dp) or partition.replicas, never both.
int whole_pipeline_replicas(const PlanRequest& r, int stages) {
  const Scheme& scheme = *r.scheme;
  const int requested = r.replicas.count;
  const int replicas = scheme.replicas(requested);
  if (requested != 1 && replicas != requested) {
    r.source->fail(kReplicas,
                   fmt::format("scheme {} sets its own replicas ({}), and partition.replicas asks for {}",
                               scheme.type(), replicas, requested),
                   "set the replicas in one place");
  }
  const std::string refused = replicas_refused(scheme, replicas);
  if (!refused.empty()) r.source->fail(kReplicas, refused, "use partition.replicas: 1");
  if (static_cast<int64_t>(stages) * replicas >= kMaxScheduleStages) {
    r.source->fail(
        kReplicas,
        fmt::format("{} stages x {} replicas is too many (fewer than {} in all)", stages, replicas, kMaxScheduleStages),
        "use fewer replicas");
  }
  return replicas;
}

/// PipeDream's replicated stages (one count per stage): what can run them.
void check_replicated_stages(const PlanRequest& r, int stages) {
  const Scheme& scheme = *r.scheme;
  const std::vector<int>& counts = r.replicas.per_stage;
  if (static_cast<int>(counts.size()) != stages) {
    r.source->fail(kReplicas, fmt::format("{} replica counts for {} pipeline stages", counts.size(), stages),
                   fmt::format("give one count per stage (a list of {})", stages));
  }
  const std::string refused = scheme.topology()->replicated_stages_refused(scheme.type());
  if (!refused.empty()) {
    r.source->fail(kReplicas, fmt::format("scheme {} cannot run replicated stages: {}", scheme.type(), refused),
                   "give one count (copies of the whole pipeline), or use scheme: {type: pipedream} with its "
                   "defaults");
  }
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total >= kMaxScheduleStages) {
    r.source->fail(kReplicas, fmt::format("{} stages in all is too many (fewer than {})", total, kMaxScheduleStages),
                   "use fewer replicas");
  }
  if (scheme.span() == Span::MiniBatch) {
    r.source->fail(kReplicas,
                   fmt::format("scheme {} flushes every mini-batch, and replicated stages deal whole mini-batches "
                               "round robin",
                               scheme.type()),
                   "give one count (copies of the whole pipeline)");
  }
  if (scheme.span() == Span::Run) {
    // The epoch snapshots of a never-flushed pipeline are taken by replica 0, which does not
    // see every epoch's last mini-batch when the stage deals them round robin.
    r.source->fail("scheme.flush", "replicated stages run one pipeline per epoch (flush: never is not modelled)",
                   "use flush: epoch with replicated stages");
  }
  if (r.several_processes) {
    r.source->fail(kReplicas, "replicated stages run in one process (threaded or sequential executor) for now",
                   "use run.executor: threaded, or one count per stage");
  }
  if (r.gradients.clip_grad_norm || r.tied_weights) {
    r.source->fail(kReplicas,
                   fmt::format("replicated stages update at different times, so {} has no one moment to meet",
                               r.gradients.clip_grad_norm ? "optimizer.clip_grad_norm" : "the model's tied weights"),
                   "give one count per stage, or train without the clip and the ties");
  }
}

/// partition.recompute per pipeline stage, refusing a stage the pipeline does not have.
std::vector<bool> recompute_of(const PlanRequest& r, int positions) {
  const std::vector<int>& listed = r.recompute.stages;
  if (!listed.empty() && listed.back() >= positions) {
    r.source->fail("partition.recompute",
                   fmt::format("stage {} is not a pipeline stage: the pipeline has {} (0 to {})", listed.back(),
                               positions, positions - 1),
                   "list stages below the pipeline's count");
  }
  if (r.recompute.kind != Recompute::Kind::Never && r.scheme->add_ons()->routes_own_gradients()) {
    r.source->fail("partition.recompute",
                   fmt::format("scheme {} computes each stage's gradients itself from its forward's autograd graph, "
                               "which a recomputed forward does not keep",
                               r.scheme->type()),
                   fmt::format("leave partition.recompute out with {}", r.scheme->type()));
  }
  return r.recompute.of(positions);
}

/// partition.offload per pipeline stage, refusing what it cannot apply to: a stage the pipeline
/// does not have, one that recomputes (it keeps only its input: nothing to move), a scheme
/// that takes its gradients from the forward's graph itself, sequence segments.
std::vector<bool> offload_of(const PlanRequest& r, const std::vector<bool>& recomputing) {
  const int positions = static_cast<int>(recomputing.size());
  if (!r.offload.any()) return std::vector<bool>(recomputing.size(), false);
  const std::vector<int>& listed = r.offload.stages.stages;
  if (!listed.empty() && listed.back() >= positions) {
    r.source->fail("partition.offload.stages",
                   fmt::format("stage {} is not a pipeline stage: the pipeline has {} (0 to {})", listed.back(),
                               positions, positions - 1),
                   "list stages below the pipeline's count");
  }
  if (r.scheme->add_ons()->routes_own_gradients()) {
    r.source->fail("partition.offload",
                   fmt::format("scheme {} computes each stage's gradients itself from its forward's autograd graph",
                               r.scheme->type()),
                   fmt::format("leave partition.offload out with {}", r.scheme->type()));
  }
  if (r.scheme->sequence_split().active()) {
    r.source->fail("partition.offload",
                   fmt::format("scheme {} computes each micro-batch in sequence segments, whose backwards read the "
                               "earlier segments' keys and values",
                               r.scheme->type()),
                   "leave partition.offload out with sequence segments");
  }
  std::vector<bool> out = r.offload.stages.of(positions);
  for (int p = 0; p < positions; ++p) {
    const bool recomputes = recomputing[static_cast<size_t>(p)] || r.scheme->stage_memory(p, positions).recompute;
    if (!out[static_cast<size_t>(p)] || !recomputes) continue;
    if (r.offload.stages.kind != Recompute::Kind::Stages) {
      out[static_cast<size_t>(p)] = false;  // `always`, `except_last`: the stages that keep their activations
      continue;
    }
    r.source->fail("partition.offload.stages",
                   fmt::format("stage {} recomputes its forward (partition.recompute, or the scheme's checkpointing): "
                               "it keeps only its input, so there is nothing to offload",
                               p),
                   "list each stage in partition.recompute or in partition.offload.stages, not both (and turn "
                   "the scheme's checkpoint off for a stage that offloads)");
  }
  return out;
}

/// A scheme that cuts sequences into segments (core/scheme/sequence_split.h): what can run it.
SequenceSplit sequence_split_of(const PlanRequest& r) {
  SequenceSplit split = r.scheme->sequence_split();
  if (!split.active()) return split;
  // Only the feed of a flush per mini-batch cuts them (plan_feed, core/feed/run_feeds.h).
  PIPELAB_ASSERT(r.scheme->span() == Span::MiniBatch, "scheme {} cuts sequences but is not flushed per mini-batch",
                 r.scheme->type());
  const auto fail = [&](const char* key, const std::string& what, const std::string& fix) {
    r.source->fail(key, fmt::format("scheme {} computes each micro-batch in {} sequence segments, {}", r.scheme->type(),
                                    split.segments, what),
                   fix);
  };
  if (!r.segment_token_work) {
    fail("scheme.segments", "but the model computes whole sequences only (a segment must read the earlier ones' "
                            "keys and values: a causal language model)",
         "use model: {type: transformer, head: lm}, or scheme.segments: 1");
  }
  if (r.recompute.kind != Recompute::Kind::Never) {
    fail("partition.recompute", "and a recomputed forward would compute whole sequences",
         "leave partition.recompute out with sequence segments");
  }
  if (r.compression.any()) {
    fail("compression", "and the boundary codecs code whole micro-batches (per-example state included)",
         "leave the compression section out with sequence segments");
  }
  if (static_cast<int64_t>(split.segments) * std::max(1, r.scheme->micro_batches()) >= kMaxScheduleStages) {
    fail("scheme.segments", fmt::format("and {} micro-batches: too many units (fewer than {})",
                                        r.scheme->micro_batches(), kMaxScheduleStages),
         "use fewer segments or micro-batches");
  }
  split.token_work = *r.segment_token_work;
  return split;
}

}  // namespace

RunPlan RunPlan::compile(const PlanRequest& request) {
  PIPELAB_ASSERT(request.scheme && request.source, "a run plan needs a scheme and the file it came from");
  RunPlan plan;
  plan.scheme_ = request.scheme;
  plan.source_ = request.source;
  plan.stages_ = request.scheme->stages(request.stages);
  plan.several_processes_ = request.several_processes;
  if (!request.replicas.per_stage.empty()) {
    check_replicated_stages(request, plan.stages_);
    plan.layout_ = StageLayout(request.replicas.per_stage);
    plan.placement_ = replicated_stages_placement(plan.layout_.counts());
  } else {
    plan.replicas_ = whole_pipeline_replicas(request, plan.stages_);
    plan.layout_ = plan.replicas_ > 1 ? StageLayout::uniform(plan.stages_, plan.replicas_) : StageLayout();
    plan.placement_ = replicated_placement(*plan.scheme_, plan.stages_, plan.replicas_);
  }
  plan.recompute_ = recompute_of(request, plan.codec_positions());
  check_offload_own(plan, request.offload, *request.source);  // before the plan offloads
  plan.offload_ = request.offload;
  plan.offloading_ = offload_of(request, plan.recompute_);
  plan.split_ = sequence_split_of(request);
  check_offload_places(plan, request.offload, *request.source);
  const bool cross = request.ties_cross_stages.value_or(plan.stages_ > 1);
  plan.sync_ = gradient_sync(request.gradients, *plan.scheme_, plan.stages_, plan.copies(), request.tied_weights,
                             request.tied_weights && cross);
  if (request.compression.any()) {
    // Whether a codec codes a message depends on the plan's shape, not on how many units a
    // run has: one unit per replica (one per micro-batch of a mini-batch) shows every boundary.
    const BoundaryCodecs codecs(request.compression, plan.codec_positions(), plan.codec_position());
    codecs.check();
    codecs.check_used(plan.training(std::vector<int>(static_cast<size_t>(plan.replicas_),
                                                     std::max(1, plan.scheme_->micro_batches()))));
  }
  return plan;
}

RunPlan RunPlan::whole_pipelines(const Scheme& scheme, int stages, int replicas, const GradientSync& sync) {
  RunPlan plan;
  plan.scheme_ = &scheme;
  plan.stages_ = stages;
  plan.replicas_ = replicas;
  plan.layout_ = replicas > 1 ? StageLayout::uniform(stages, replicas) : StageLayout();
  plan.placement_ = replicated_placement(scheme, stages, replicas);
  plan.sync_ = sync;
  plan.split_ = scheme.sequence_split();  // a what-if: whatever the model, the cost model's attention alone
  return plan;
}

int RunPlan::codec_positions() const {
  return layout_.replicated() ? static_cast<int>(layout_.counts().size()) : stages_;
}

std::function<int(int)> RunPlan::codec_position() const {
  return [layout = layout_](int stage) { return layout.position(stage); };
}

bool RunPlan::recomputes(int stage) const {
  const size_t p = static_cast<size_t>(layout_.replicated() ? layout_.position(stage) : stage % std::max(1, stages_));
  return p < recompute_.size() && recompute_[p];
}

StageMemory RunPlan::stage_memory(int stage) const {
  const int p = layout_.replicated() ? layout_.position(stage) : stage % std::max(1, stages_);
  StageMemory m = scheme_->stage_memory(p, stages_);
  m.recompute = m.recompute || recomputes(stage);
  return m;
}

int RunPlan::copies() const { return std::max(replicas_, layout_.max_replicas()); }

int RunPlan::devices() const {
  return placement_.empty() ? 0 : *std::max_element(placement_.begin(), placement_.end()) + 1;
}

ValidateOptions RunPlan::rules() const {
  return layout_.uniform() ? replicated_rules(*scheme_, stages_, replicas_, sync_)
                           : replicated_stages_rules(*scheme_, layout_.counts());
}

bool RunPlan::flushed() const { return scheme_->span() == Span::MiniBatch; }

StepShape RunPlan::step(int64_t batch_size, int micro_batches) const {
  StepShape s;
  s.flushed = flushed();
  const int own = std::max(1, scheme_->micro_batches());
  s.micro_batches = micro_batches > 0 ? micro_batches : own;
  s.micro_batches_per_update = s.flushed ? s.micro_batches : own;
  s.segments = split_.active() ? split_.segments : 1;
  // A flushed step cuts its mini-batch into micro-batches; a pipeline that runs on takes a
  // loader batch per unit (2BW's and XPipe's micro-batches), unless a what-if cuts it too.
  const int cut = s.flushed || micro_batches > 0 ? s.micro_batches : 1;
  s.examples_per_micro_batch = static_cast<double>(batch_size) / cut / replicas_;
  // A pipeline that runs on fills before it reaches its steady state: its deepest path is
  // its stage count, or the devices one pipeline spans (PipeDream's replicated stages deal
  // mini-batches round robin over more devices than stages).
  const int depth = std::max(stages_, devices() / std::max(1, replicas_));
  const int per = s.micro_batches_per_update;
  s.replay_micro_batches = s.flushed ? s.micro_batches : (std::max(4 * depth, s.micro_batches) + per - 1) / per * per;
  return s;
}

std::vector<int> RunPlan::units_for_batch(int64_t n) const {
  std::vector<int> units;
  for (const auto& sizes : replica_chunk_sizes(n, replicas_, scheme_->micro_batches())) {
    units.push_back(static_cast<int>(sizes.size()));
  }
  return units;
}

std::vector<int> RunPlan::run_units(int64_t batch_size, int64_t mini_batches) const {
  if (scheme_->span() == Span::MiniBatch) return units_for_batch(batch_size);
  return equal_units(static_cast<int>(mini_batches), replicas_);
}

void RunPlan::check_batch_size(int64_t batch_size) const {
  if (!source_) return;  // a what-if plan (whole_pipelines) has no file to point at
  if (scheme_->span() == Span::MiniBatch) {
    const int m = scheme_->micro_batches() * replicas_;
    if (m > batch_size) {
      source_->fail("run.batch_size",
                    fmt::format("scheme {} splits each mini-batch into {} micro-batches{}, but a mini-batch has only "
                                "{} examples",
                                scheme_->type(), m, replicas_ > 1 ? " over its replicas" : "", batch_size),
                    fmt::format("use run.batch_size >= {} or fewer micro-batches", m));
    }
  } else if (replicas_ > batch_size) {
    // Each mini-batch is split over the replicas (the training loader drops a short last one).
    source_->fail("run.batch_size",
                  fmt::format("{} replicas each take a share of every mini-batch, but a mini-batch has only {} "
                              "examples",
                              replicas_, batch_size),
                  fmt::format("use run.batch_size >= {} or fewer replicas", replicas_));
  }
}

void RunPlan::check_sequences(const std::vector<int64_t>& input_shape) const {
  if (!split_.active() || !source_) return;
  if (input_shape.size() != 1 || input_shape[0] < split_.segments) {
    source_->fail("scheme.segments",
                  fmt::format("{} segments per sequence, but the examples have shape {}", split_.segments,
                              shape_text(input_shape)),
                  input_shape.size() == 1 ? fmt::format("use at most {} segments", input_shape[0])
                                          : std::string("use a dataset of token sequences"));
  }
}

Schedule RunPlan::program(const std::vector<int>& units) const {
  const Schedule s = layout_.uniform()
                         ? replicated_schedule(*scheme_, stages_, units, sync_)
                         // Replicated stages: one pipeline whose stages deal the mini-batches round robin.
                         : replicated_stages_schedule(layout_.counts(), std::accumulate(units.begin(), units.end(), 0));
  if (!offload_.any()) return s;
  OffloadPolicy policy;
  for (int id = 0; id < s.stages(); ++id) policy.stages.push_back(offloads(id));
  policy.fraction = offload_.fraction;
  policy.prefetch = offload_.prefetch;
  return offload(s, policy);
}

bool RunPlan::offloads(int stage) const {
  const size_t p = static_cast<size_t>(layout_.replicated() ? layout_.position(stage) : stage % std::max(1, stages_));
  return p < offloading_.size() && offloading_[p];
}

Schedule RunPlan::training(const std::vector<int>& units) const {
  Schedule s = program(units);
  return layout_.uniform() ? with_communication(s) : s;
}

int RunPlan::epochs_per_pass(int epochs_left) const {
  return scheme_->span() == Span::Run ? std::max(epochs_left, 1) : 1;
}

int64_t RunPlan::mini_batches_per_run(int64_t pass_mini_batches) const {
  return scheme_->span() == Span::MiniBatch ? 1 : pass_mini_batches;
}

bool RunPlan::stops_at_steps() const { return scheme_->span() != Span::Run; }

std::vector<int> RunPlan::replica_view(int r) const {
  std::vector<int> ids;
  for (int p = 0; p < stages_; ++p) {
    const int copies = layout_.replicated() ? layout_.counts()[static_cast<size_t>(p)] : 1;
    ids.push_back(layout_.stage(p, std::min(r, copies - 1)));
  }
  return ids;
}

bool RunPlan::separate_replicas() const {
  if (replicas_ < 2 || !scheme_ || placement_.size() < static_cast<size_t>(stages_)) return false;
  const auto stages = static_cast<size_t>(stages_);
  const int devices = *std::max_element(placement_.begin(), placement_.begin() + static_cast<std::ptrdiff_t>(stages)) + 1;
  for (size_t id = 0; id < placement_.size(); ++id) {
    const size_t r = id / stages, s = id % stages;
    if (placement_[id] != static_cast<int>(r) * devices + placement_[s]) return false;
  }
  return true;
}

RunPlan RunPlan::first_replica() const {
  if (replicas_ <= 1) return *this;
  RunPlan one = *this;
  one.replicas_ = 1;
  one.layout_ = StageLayout();
  one.placement_.assign(placement_.begin(), placement_.begin() + stages_);
  one.sync_.always = true;  // the replicas' ALLREDUCE before each update
  return one;
}

}  // namespace pipelab
