#pragma once
/// What one optimizer step of a run plan is, in the units its schedule counts: the one answer
/// that `pipelab run` trains by and `simulate` and `plan` replay (RunPlan::step). A schedule's
/// unit is a micro-batch of a mini-batch when the pipeline is flushed per mini-batch (GPipe,
/// 1F1B with a flush, zero-bubble, V shapes), and a mini-batch's share when it is not
/// (PipeDream's 1F1B runs on across mini-batches); a scheme that cuts sequences into
/// segments (Seq1F1B, TeraPipe) schedules each micro-batch as `segments` units.
#include <cstdint>
#include <vector>

namespace pipelab {

/// Sizes of the micro-batches of a mini-batch of `n` examples split `chunks` ways, with
/// torchgpipe's chunk semantics: ceil(n / chunks) each, the last one smaller, so there can
/// be fewer than `chunks` of them (n = 6, chunks = 4 -> 2, 2, 2).
std::vector<int64_t> chunk_sizes(int64_t n, int chunks);

/// Per replica of the pipeline (`partition.replicas`), the micro-batch sizes of its share
/// of a mini-batch of `n` examples: n split `replicas` ways, then each share `chunks` ways,
/// both with chunk semantics (DDP's per-replica batch, then GPipe's chunks). A replica
/// without a share (n < replicas) gets none.
std::vector<std::vector<int64_t>> replica_chunk_sizes(int64_t n, int replicas, int chunks);

/// One step, as RunPlan::step computes it.
struct StepShape {
  /// The pipeline drains at every mini-batch: a step is one run of the schedule.
  bool flushed = true;
  /// Micro-batches one replica runs per step: a flushed mini-batch's count as asked (one too
  /// small for it has fewer, as chunk_sizes splits it); not flushed, the loader batches of
  /// one update.
  int micro_batches = 1;
  /// Of those, how many go into each update of a stage: all of them when flushed; the
  /// scheme's own count when not (1 for PipeDream: every batch updates; 2BW's m).
  int micro_batches_per_update = 1;
  /// Schedule units per micro-batch: the sequence segments of Seq1F1B and TeraPipe, else 1.
  int segments = 1;
  /// Micro-batches one replay of the step covers: the step's own when flushed; a pipeline
  /// that runs on is replayed long enough to reach its steady state (four per stage of its
  /// deepest path, at least the step's), in whole updates.
  int replay_micro_batches = 1;
  /// Examples in one micro-batch of one replica.
  double examples_per_micro_batch = 1;
};

}  // namespace pipelab
