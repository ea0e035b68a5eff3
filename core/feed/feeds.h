#pragma once
/// The feeds the runner hands to executors: one mini-batch split into micro-batches
/// (GPipe-style spans), or the mini-batches of a loader's epoch (1F1B spans, evaluation).
#include <functional>
#include <map>
#include <mutex>

#include "core/data/loader.h"
#include "core/exec/executor.h"
#include "core/plan/step_shape.h"  // chunk_sizes, replica_chunk_sizes

namespace pipelab {

/// Loss, hits and examples accumulated over micro-batches (plain numbers: reading them
/// costs one .item() each, as in any training loop that logs its loss).
struct LossTotals {
  double loss = 0;  ///< sum of reported (scaled) losses
  int64_t correct = 0;
  int64_t count = 0;
  int64_t predictions = 0;  ///< targets predicted (MicroBatchResult::predictions)
  /// Adds one micro-batch; returns its loss.
  double add(const MicroBatchResult& r);
  void add(const LossTotals& t);
};

/// One mini-batch split into micro-batches. Micro-batch i's mean loss is scaled by n_i / N, so the
/// gradients accumulated over micro-batches are exactly those of the mean loss over the whole
/// mini-batch (loss averaging, docs/schemes.md, "gpipe"), and the reported losses add up to it.
/// Ragged text (a batch with documents) weighs by predicted targets instead of examples (the
/// mini-batch's loss is the mean over its tokens), and each micro-batch drops the columns
/// that are padding in all its rows: micro-batches of one step differ in length.
class ChunkFeed : public Feed {
 public:
  ChunkFeed(const Batch& batch, int chunks, at::ScalarType dtype);
  /// Micro-batches of the given sizes (summing to the batch's size), in order; ragged text's of
  /// at least `min_length` tokens (a sequence split's segments each need one).
  ChunkFeed(const Batch& batch, const std::vector<int64_t>& sizes, at::ScalarType dtype, int64_t min_length = 1);
  int count() const { return static_cast<int>(xs_.size()); }
  at::Tensor input(int mb) override { return xs_.at(static_cast<size_t>(mb)); }
  at::Tensor target(int mb) override { return ys_.at(static_cast<size_t>(mb)); }
  double loss_scale(int mb) override { return scales_.at(static_cast<size_t>(mb)); }
  void on_result(int mb, const MicroBatchResult& r) override;
  at::Tensor example_ids(int mb) override { return ids_.empty() ? at::Tensor() : ids_.at(static_cast<size_t>(mb)); }
  at::Tensor documents(int mb) override {
    return documents_.empty() ? at::Tensor() : documents_.at(static_cast<size_t>(mb));
  }
  /// The results so far, added in the order they came. Read here and not as they come:
  /// reading a loss on a GPU waits for it, and the last stage reports right after its
  /// forward, so reading then would stall the device queue between the forward and the
  /// backward of every step (call after the run, once).
  LossTotals totals() const;

 private:
  std::vector<at::Tensor> xs_, ys_, ids_, documents_;
  std::vector<double> scales_;
  mutable std::mutex mutex_;
  std::vector<MicroBatchResult> results_;
};

/// Mini-batch j of a loader's current epoch as micro-batch j, fetched when the first stage
/// asks for it; each result goes to `on_result(j, result)`. With `per_epoch` > 0 the
/// micro-batches run on across epochs: micro-batch g is mini-batch g % per_epoch of epoch
/// first_epoch + g / per_epoch (a pipeline that is never flushed).
class LoaderFeed : public Feed {
 public:
  LoaderFeed(DataLoader& loader, at::ScalarType dtype,
             std::function<void(int, const MicroBatchResult&)> on_result, int64_t per_epoch = 0,
             int first_epoch = 0);
  at::Tensor input(int mb) override;
  at::Tensor target(int mb) override;
  void on_result(int mb, const MicroBatchResult& r) override;
  at::Tensor example_ids(int mb) override;
  at::Tensor documents(int mb) override;

 private:
  /// The loader's epoch and batch of micro-batch mb.
  std::pair<int, int64_t> where(int mb) const;
  DataLoader& loader_;
  at::ScalarType dtype_;
  std::function<void(int, const MicroBatchResult&)> on_result_;
  int64_t per_epoch_;
  int first_epoch_, epoch_ = -1;
  std::mutex mutex_;
  std::map<int, at::Tensor> targets_, documents_;
};

/// Replicas of a pipeline that runs across mini-batches (an asynchronous scheme's epoch or
/// run; core/scheme/replicas.h): the replicated schedule gives replica r's micro-batch k the
/// id r * units + k (core/schedule/replicate.h), and that micro-batch is replica r's share of
/// the inner feed's micro-batch k (a whole mini-batch), split with chunk semantics like a
/// synchronous scheme's shares. Each share's loss is scaled by its part of the mini-batch, so
/// the all-reduced gradient is the whole mini-batch's; the R results of micro-batch k reach
/// the inner feed as one (their sum), in the order of k. In one process each mini-batch is
/// fetched once, when the first replica asks; a share's input is dropped once taken, the rest
/// with its result. In a process of a multi-process run (`one_process` false) the stages of
/// one replica ask, so nothing is kept: each call takes its share of the inner feed's answer.
class ReplicaFeed : public Feed {
 public:
  /// `units`: the micro-batches of one replica's schedule.
  ReplicaFeed(Feed& inner, int replicas, int units, bool one_process = true);
  at::Tensor input(int mb) override;
  at::Tensor target(int mb) override;
  double loss_scale(int mb) override;
  void on_result(int mb, const MicroBatchResult& r) override;
  at::Tensor example_ids(int mb) override;
  at::Tensor documents(int mb) override;

 private:
  /// What replica r's share of micro-batch k needs until its result is in.
  struct Share {
    at::Tensor input, target, documents;
    double scale = 1;
  };
  /// Fetches and splits the inner micro-batches up to `k` not fetched yet. Caller holds mutex_.
  void fetch(int k);
  Share& share(int mb);
  /// Replica `r`'s rows of a mini-batch tensor `t` (its share, with chunk semantics).
  at::Tensor rows(const at::Tensor& t, int r) const;

  Feed& inner_;
  int replicas_, units_;
  bool one_process_;
  std::mutex mutex_;
  std::map<int, Share> shares_;   ///< by the replicated schedule's micro-batch id
  /// The results of one inner micro-batch's shares, by replica.
  struct Parts {
    std::vector<MicroBatchResult> results;
    int in = 0;
  };
  std::map<int, Parts> results_;  ///< by inner micro-batch
  int fetched_until_ = 0;         ///< inner micro-batches below this were fetched
  int next_ = 0;                  ///< the inner micro-batch to report next
};

/// `scale` times the part of a mini-batch's loss its rows [start, start + size) carry: their
/// share of its examples, or, with a document layout, of its predicted targets `y`.
double loss_part(double scale, const at::Tensor& y, bool documents, int64_t start, int64_t size);

/// Ragged text's rows longest first within each group of consecutive rows (`groups`: their
/// sizes, a replica's share each), ties in their order: each micro-batch of a share then
/// holds rows of like lengths, and ChunkFeed cuts it to little padding. A share keeps its
/// rows, and a mini-batch's loss, a mean over its predicted tokens, is the same whichever
/// micro-batch holds a row. Fixed-length batches come back as they are.
Batch longest_first(const Batch& batch, const std::vector<int64_t>& groups);

/// Casts floating-point inputs to the run's dtype; integer inputs (token ids) stay.
at::Tensor cast_input(const at::Tensor& x, at::ScalarType dtype);

}  // namespace pipelab
