#include "core/feed/run_feeds.h"

#include <numeric>

#include "core/util/error.h"

namespace pipelab {

ChunkedRunFeed::ChunkedRunFeed(DataLoader& loader, at::ScalarType dtype, const Window& window, int replicas,
                               int micro_batches, Done done, const SequenceSplit& split)
    : mini_batch_(window.first), done_(std::move(done)) {
  PIPELAB_ASSERT(window.count == 1, "a run flushed per mini-batch covers one, not {}", window.count);
  const int epoch = window.first_epoch + static_cast<int>(window.first / window.per_epoch);
  if (loader.epoch() != epoch) loader.start_epoch(epoch);
  const Batch loaded = loader.batch(window.first % window.per_epoch);
  // Each replica's share of the mini-batch, split into its micro-batches, in order.
  std::vector<int64_t> sizes, shares;
  for (const auto& share : replica_chunk_sizes(loaded.x.size(0), replicas, micro_batches)) {
    sizes.insert(sizes.end(), share.begin(), share.end());
    shares.push_back(std::accumulate(share.begin(), share.end(), int64_t{0}));
  }
  // Ragged text: a share's micro-batches of like lengths, cut to their own.
  const Batch batch = sizes.size() > shares.size() ? longest_first(loaded, shares) : loaded;
  chunks_ = std::make_unique<ChunkFeed>(batch, sizes, dtype, split.active() ? split.segments : 1);
  if (split.active()) segments_ = std::make_unique<SegmentFeed>(*chunks_, split);
}

LoaderRunFeed::LoaderRunFeed(DataLoader& loader, at::ScalarType dtype, const Window& window, int replicas, Done done,
                             bool one_process)
    : done_(std::move(done)),
      mini_batches_(
          loader, dtype,
          [this](int mb, const MicroBatchResult& r) {
            LossTotals totals;
            totals.add(r);
            done_(mb, totals);
          },
          window.per_epoch, window.first_epoch) {
  // The run covers its whole pass: micro-batch g is the pass's mini-batch g.
  PIPELAB_ASSERT(window.first == 0, "a pipelined run starts its pass, not at mini-batch {}", window.first);
  if (replicas > 0) {
    shares_ = std::make_unique<ReplicaFeed>(mini_batches_, replicas, static_cast<int>(window.count), one_process);
  }
}

std::unique_ptr<RunFeed> plan_feed(const RunPlan& plan, DataLoader& loader, at::ScalarType dtype,
                                   const RunFeed::Window& window, RunFeed::Done done, bool one_process) {
  const StepShape step = plan.step(/*batch_size=*/1);  // how the step splits, not its examples
  if (step.flushed) {
    return std::make_unique<ChunkedRunFeed>(loader, dtype, window, plan.replicas(), step.micro_batches,
                                            std::move(done), plan.sequence_split());
  }
  return std::make_unique<LoaderRunFeed>(loader, dtype, window, plan.copies() > 1 ? plan.replicas() : 0,
                                         std::move(done), one_process);
}

}  // namespace pipelab
