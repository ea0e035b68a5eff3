#pragma once
/// `pipelab simulate` with compressed stage boundaries (docs/compression.md) on costs that were
/// not measured with them (derived from FLOPs, given by hand, or a plain run's): each compressed
/// boundary's messages become what its codec encodes a tensor of their size to, and the
/// codec's encode and decode times, measured here on this host's CPU (where codecs run), join
/// the sender's and the receiver's forward or backward. Costs measured with compression carry
/// both already (core/records/stage_costs.h).
#include "core/compress/compression.h"
#include "tools/simulate/costs.h"

namespace pipelab::sim {

/// What apply_compression measured for one direction of one boundary.
struct CodecFigures {
  double bytes = 0;                            ///< encoded bytes per micro-batch
  double encode_seconds = 0, decode_seconds = 0;  ///< medians of a few steady-state calls
};

/// The figures of `codec` on a float32 tensor of `elements` elements in `rows` rows (one per
/// example: AQ-SGD keys its history by them), after enough calls to pass a warm-up.
CodecFigures measure_codec(const Codec& codec, double elements, int64_t rows);

/// `c` with the boundaries of `section` compressed; `dtype_bytes`: bytes per element of the
/// messages in `c`. A no-op when `c` was measured with compression. Each codec is measured
/// once per tensor size in a process (a planner asks for the same sizes many times).
void apply_compression(SimCosts& c, const CompressionSection& section, double dtype_bytes);

}  // namespace pipelab::sim
