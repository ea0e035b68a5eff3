#pragma once
/// The feed of one training schedule run, as the run plan's step splits it (plan_feed,
/// below): the step loop asks for one whatever the flush span, and hears of each finished
/// mini-batch's totals.
#include <functional>
#include <memory>

#include "core/feed/feeds.h"
#include "core/feed/segment_feed.h"
#include "core/plan/run_plan.h"

namespace pipelab {

class RunFeed {
 public:
  /// Mini-batches [first, first + count) of a pass that starts at epoch `first_epoch`, whose
  /// mini-batch g is batch g % per_epoch of epoch first_epoch + g / per_epoch.
  struct Window {
    int first_epoch = 0;
    int64_t per_epoch = 1;
    int64_t first = 0, count = 1;
  };
  /// Mini-batch g of the pass finished with these totals (reported in order of g).
  using Done = std::function<void(int64_t mini_batch, const LossTotals& totals)>;

  virtual ~RunFeed() = default;
  /// What the executor reads.
  virtual Feed& feed() = 0;
  /// After the schedule run: reports what only the run's end completes.
  virtual void finish() {}
};

/// A flush per mini-batch (GPipe-style): the window's one mini-batch, each replica's share of
/// it split into the scheme's micro-batches; its totals are reported once the run is over.
class ChunkedRunFeed final : public RunFeed {
 public:
  /// With an active `split`, the executor reads each micro-batch's sequence segments.
  ChunkedRunFeed(DataLoader& loader, at::ScalarType dtype, const Window& window, int replicas, int micro_batches,
                 Done done, const SequenceSplit& split = {});
  Feed& feed() override { return segments_ ? static_cast<Feed&>(*segments_) : *chunks_; }
  void finish() override { done_(mini_batch_, chunks_->totals()); }

 private:
  int64_t mini_batch_;
  Done done_;
  std::unique_ptr<ChunkFeed> chunks_;
  std::unique_ptr<SegmentFeed> segments_;
};

/// A pipeline across mini-batches (an epoch, or every epoch of a run never flushed):
/// mini-batch g as micro-batch g, fetched when the first stage asks for it. With `replicas`
/// > 0 each replica (or replicated stage) takes its share through a ReplicaFeed.
class LoaderRunFeed final : public RunFeed {
 public:
  LoaderRunFeed(DataLoader& loader, at::ScalarType dtype, const Window& window, int replicas, Done done,
                bool one_process);
  Feed& feed() override { return shares_ ? static_cast<Feed&>(*shares_) : mini_batches_; }

 private:
  Done done_;
  LoaderFeed mini_batches_;
  std::unique_ptr<ReplicaFeed> shares_;
};

/// The feed of one schedule run of `plan` over mini-batches [first, first + count) of a pass
/// that starts at epoch `first_epoch` (mini-batch g is batch g % per_epoch of epoch
/// first_epoch + g / per_epoch), split as the plan's step splits them: a flushed step's
/// micro-batches per replica (and their sequence segments), else each mini-batch whole, a
/// share per replica.
std::unique_ptr<RunFeed> plan_feed(const RunPlan& plan, DataLoader& loader, at::ScalarType dtype,
                                   const RunFeed::Window& window, RunFeed::Done done, bool one_process);

}  // namespace pipelab
