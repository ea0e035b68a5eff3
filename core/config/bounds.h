#pragma once
/// Ceilings on the sizes and counts a file may give a model (docs/models.md, "Bounds"): a
/// mistyped `layers: 1000000` or `hidden: 1e9` is refused when the file is read, before
/// anything is built, rather than building for minutes or allocating the machine away.
/// Memory is checked on top of these (core/util/memory_size.h).
#include "core/config/fields.h"

namespace pipelab {

/// Widths: features, channels, hidden sizes, vocabularies (2^24).
inline constexpr double kMaxWidth = 1 << 24;
/// Repeated parts: layers, blocks, cells, down-sampling steps.
inline constexpr double kMaxRepeats = 4096;

/// A width from 1 to kMaxWidth.
inline InRange width_bound() { return in_range(1, kMaxWidth); }
/// A count of repeated parts from 1 to kMaxRepeats.
inline InRange repeats_bound() { return in_range(1, kMaxRepeats); }

}  // namespace pipelab
