/// A model's evaluation (core/run/evaluation.h).
#include "core/run/evaluation.h"

#include "core/assembly/run_parts.h"
#include "core/feed/feeds.h"
#include "core/run/classification_metrics.h"
#include "core/schedule/generators.h"
#include "core/util/memory_meter.h"

namespace pipelab {

double percent_of(int64_t hits, int64_t count) {
  return count ? 100.0 * static_cast<double>(hits) / static_cast<double>(count) : 0.0;
}

Evaluation evaluate_model(const Experiment& e, RunParts& parts, DataLoader& loader, Schedule& schedule) {
  // The meter stays installed on the device threads: the test batches' frees of blocks it
  // never saw would make c10 log "Memory block of unknown size" every 1000 frees.
  MemoryMeter::QuietAllocatorLog quiet(e.executor->stats().memory);
  loader.start_epoch(0);
  double loss_sum = 0;
  int64_t correct = 0, count = 0, predictions = 0;
  at::Tensor confusion;  // summed over the test set where the data's metric needs it
  // A batch's loss is its mean over its examples, or over its tokens where they are ragged.
  const bool per_token = parts.data.spec.documents;
  LoaderFeed feed(loader, parts.dtype, [&](int, const MicroBatchResult& r) {
    loss_sum += r.loss.item<double>() * static_cast<double>(per_token ? r.predictions : r.count);
    correct += r.correct.item<int64_t>();
    count += per_token ? r.predictions : r.count;
    predictions += r.predictions;
    if (r.confusion.defined()) confusion = confusion.defined() ? confusion + r.confusion : r.confusion.clone();
  });
  // Replicas of the pipeline hold the same weights: replica 0 evaluates (with its own
  // batch-norm statistics, as DDP's rank 0 does).
  const std::vector<int> model = parts.plan.replica_view(0);
  std::vector<StageSlot> slots;
  std::vector<int> placement;
  for (const int id : model) {
    slots.push_back(parts.slots[static_cast<size_t>(id)]);
    placement.push_back(parts.plan.placement()[static_cast<size_t>(id)]);
  }
  if (!schedule.stages()) {
    schedule = schedules::forward_only(static_cast<int>(model.size()), static_cast<int>(loader.batches()), placement);
  }
  if (loader.batches() > 0) e.executor->run(schedule, slots, feed, RunMode::Eval);
  Evaluation out;
  out.loss = count ? loss_sum / static_cast<double>(count) : 0;
  out.acc = percent_of(correct, predictions);
  if (confusion.defined()) out.mcc = 100 * matthews_correlation(confusion);
  return out;
}

}  // namespace pipelab
