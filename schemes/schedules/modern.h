#pragma once
/// Modern pipeline schedules as pure generators (docs/schedules.md): several stages per device
/// (interleaved, looped and V-shaped placements) and the backward split into I (input gradient)
/// and W (weight gradient). Each returns a compute-only schedule; lower() adds the messages.
///
/// Common to all: `stages = devices x chunks`, micro-batches 0..m-1 run on every stage, and each
/// stage ends with one U after its last backward (a synchronous flush per mini-batch). The
/// figures quoted below are under unit costs (CostModel::split(S, 1, 1, 1): F = I = W = 1, a
/// whole B = 2), as tests/schemes/modern_schedules_test.cpp checks them. A precondition that
/// does not hold throws UserError saying how to fix it.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab::schedules {

/// Stage s on device s % devices (Megatron's interleaving, and the looped BFS): device d holds
/// stages d, d + p, d + 2p, ...
std::vector<int> looped_placement(int devices, int virtual_stages);

/// Two stages per device in a V: stage s < p on device s, stage s >= p on device 2p-1-s, so
/// the first and the last stage share device 0 and the turn of the V (p-1, p) is on device p-1.
std::vector<int> v_placement(int devices);

/// Interleaved 1F1B (Narayanan et al., SC'21; Megatron-LM's
/// `forward_backward_pipelining_with_interleaving`; torch's ScheduleInterleaved1F1B):
/// looped placement, depth-first over the chunks in rounds of m/R micro-batches, R =
/// max(1, floor(m/p)) (torch's flexible counts; m a multiple of R), whole backwards; v >= 2.
/// Bubble (p-1)/(v*m + p-1); device d holds min(2(p-1-d) + (v-1)m/R + 1, v*m) micro-batches
/// (Megatron, which needs m a multiple of p, runs every forward first when m == p; torch does
/// not, and neither does pipelab).
/// With `segments` k > 1, Seq1F1B's interleaved form (Sun et al. 2024): each micro-batch is k
/// units (core/scheme/sequence_split.h), a round holds its micro-batches' units, every device
/// warms up k - 1 units more, and each micro-batch's backwards run its segments in reverse.
Schedule interleaved_1f1b(int devices, int virtual_stages, int micro_batches, int segments = 1);

/// Looped BFS (Lamy-Poirier 2022, "Breadth-First Pipeline Parallelism"; torch's
/// ScheduleLoopedBFS): looped placement, each device runs every forward of its first stage, then
/// of its next, ..., then the backwards in reverse. For m >= p the bubble is (p-1)/(v*m + p-1)
/// and each device holds all v*m micro-batches.
Schedule looped_bfs(int devices, int virtual_stages, int micro_batches);

/// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3.1): 1F1B with the
/// backward split, device d postponing its first d weight gradients. Idle per device
/// (p-1)(F+I-W) for W <= min(F, I) (a third of 1F1B's under unit costs), at most p micro-batches
/// on every device.
Schedule zb_h1(int devices, int micro_batches);

/// torch's ScheduleInterleavedZeroBubble (torch 2.15; docs/schedules.md "Built-in schedules",
/// golden order in docs/schemes.md, "Numbered oracles"): ZB-H1 over v looped stages per device, in rounds of
/// n/R micro-batches with R = max(1, floor(n/p)) (torch's flexible micro-batch counts, PR 129597);
/// n must be a multiple of R (torch's rule, docs/schemes.md, "Quirks").
Schedule interleaved_zero_bubble(int devices, int virtual_stages, int micro_batches);

/// ZB-H2 (same paper, section 3.1): more warm-up forwards (2(p-1-d)+1 on device d) and the weight
/// gradients moved to the tail, so that a device never idles between its first and last action
/// for m >= 2p-1; every device holds 2p-1 micro-batches.
Schedule zb_h2(int devices, int micro_batches);

/// ZB-V (same authors, section 6; torch's ScheduleZBVZeroBubble): V placement, two stages per device,
/// I/W split; no idle time inside a device's span for m >= 2p-1, at 2p stage-micro-batches per
/// device (1F1B's peak over 2p stages, each half the size of a 1F1B stage).
Schedule zbv(int devices, int micro_batches);

/// Chimera (Li, Hoefler, SC'21; docs/schemes.md, "chimera"): two replicas of a D-stage pipeline in
/// opposite directions on the same D devices (D even), `n` micro-batches each, merged as the
/// reference code orders them: for n = D/2 the basic unit, beyond it the direct concatenation of
/// units or, with `doubling`, forward doubling (all three in docs/schemes.md, "chimera"). Replica 0's stage s is model
/// stage s on device s, replica 1's is model stage D + s on device D-1-s (chimera_placement);
/// replica 1's micro-batches are n..2n-1. Each stage's U follows its last backward.
Schedule chimera(int devices, int micro_batches_per_pipeline, bool doubling);
std::vector<int> chimera_placement(int devices);

/// V-Half and V-Min (Qi, Wan, Amar, Lin, "Pipeline Parallelism with Controllable Memory",
/// arXiv:2405.15362; docs/schedules.md "Built-in schedules"): V placement, I/W split, the
/// reference code's building block repeated and squeezed greedily under unit costs. Peak
/// activations per device (p+2)//2 (half) and (p+4)//3 (min) full-stage micro-batches.
Schedule v_half(int devices, int micro_batches);
Schedule v_min(int devices, int micro_batches);

/// DualPipeV (DeepSeek-V3 report section 3.2.1, DualPipe folded into a V; torch's
/// ScheduleDualPipeV): V placement; in the steady state each device pairs the forward of one
/// of its stages with the backward of the other (DualPipe overlaps the two). Needs m >= 2p.
/// 2p+1 stage-micro-batches per device (the report's "PP+1").
Schedule dualpipe_v(int devices, int micro_batches);

}  // namespace pipelab::schedules
