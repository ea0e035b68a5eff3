#pragma once
/// The traced actions of a multi-process run, brought to one process: each process packs
/// the ActionRecords of the stages it runs (and their memory peaks) into rows of a tensor,
/// with its clock reading at a common instant; the process that writes the records adds the
/// others' rows onto its own clock (ProcessWorld::merge_stats, core/exec/process_world.h).
#include <ATen/Tensor.h>

#include <vector>

#include "core/exec/executor.h"

namespace pipelab {

/// The records and peaks of `stages` in `stats`, as rows of kTraceColumns doubles (every
/// integer field is exact: counts and bytes stay far below 2^53), with `now`: this
/// process's seconds since stats.origin, read right after a barrier every process passed.
at::Tensor trace_rows(const ExecStats& stats, const std::vector<int>& stages, double now);
inline constexpr int64_t kTraceColumns = 11;

/// Adds another process's trace_rows to `stats`, its times moved onto this process's clock:
/// `now` is this process's reading after the same barrier, so a time t there is
/// t + (now - its now) here. Records are appended to their stage; peaks replace.
void add_trace_rows(const at::Tensor& rows, double now, ExecStats& stats);

}  // namespace pipelab
