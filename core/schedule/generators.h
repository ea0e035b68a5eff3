#pragma once
/// Schedule generators: pure functions of (stages, micro-batches), golden-tested in
/// tests/golden/. They return compute-only schedules (one stage per device unless said
/// otherwise); lower() adds the messages. See docs/schemes.md, "Schedules" and docs/schedules.md.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab::schedules {

/// Naive sequential model parallelism (docs/schemes.md, "Naive model parallelism"): for each micro-batch, F on every
/// stage, then B, each stage stepping right after its own B. Utilisation 1/D.
Schedule naive(int stages, int micro_batches);

/// GPipe fill-drain (docs/schemes.md, "GPipe fill-drain"): every stage runs F0..F(m-1), then B(m-1)..B0 (torchgpipe
/// runs each partition's backward in reverse micro-batch order), then one update.
Schedule gpipe(int stages, int micro_batches);

/// 1F1B (docs/schemes.md, "1F1B"): stage r runs w_r = D-1-r warm-up forwards, then F(w_r+i) B(i) U, then
/// drains the remaining backwards, each followed by an update.
/// With `segments` k > 1, 1F1B over sequence-segment units (Seq1F1B, Sun et al. 2024;
/// core/scheme/sequence_split.h): m micro-batches make m k units, forwards in unit order,
/// w_r = D-1-r + k-1 warm-up units (the backward of a micro-batch's last segment, which comes
/// first, needs all k forwards), and each micro-batch's backwards in reverse segment order.
Schedule one_f_one_b(int stages, int micro_batches, int segments = 1);

/// 1F1B (with its `segments`) without the update after each backward: each stage steps once,
/// after its last backward (PipeDream-Flush's flush per mini-batch; Seq1F1B's).
Schedule one_f_one_b_flushed(int stages, int micro_batches, int segments = 1);

/// The unit whose backward is the i-th of a stage that runs whole micro-batches of
/// `segments` units in order, each one's segments in reverse: unit i with its segment
/// number mirrored within its micro-batch (i itself for one segment).
inline int reversed_segment(int i, int segments) { return i / segments * segments + segments - 1 - i % segments; }

/// PipeDream's 1F1B-RR (SOSP'19 section 3.2; its runtime's warm-up rule) for replicated stages:
/// pipeline stage p has counts[p] replicas, each on its own device, and its replica
/// k % counts[p] takes micro-batch k (round robin). Each replica runs 1F1B over its own
/// micro-batches with w_p = (N - 1 - sum_{i<p} counts[i]) / counts[p] warm-up forwards, N the
/// replicas of all stages (D - 1 - p for one replica each). A replica with fewer micro-batches
/// than its stage's others ends with an extra U, so that all of them update equally often
/// (the all-reduce before each U then gathers the gradients that exist). The result carries
/// its layout (stage (p, r) numbered as core/schedule/stage_layout.h says); device = stage.
Schedule one_f_one_b_round_robin(const std::vector<int>& counts, int micro_batches);
/// w_p of one_f_one_b_round_robin for every pipeline stage.
std::vector<int> round_robin_warmups(const std::vector<int>& counts);

/// Forward passes only (evaluation): F0..F(n-1) on every stage; with a placement (the
/// device of each stage), each device runs its stages one after the other.
Schedule forward_only(int stages, int micro_batches, const std::vector<int>& placement = {});

}  // namespace pipelab::schedules
