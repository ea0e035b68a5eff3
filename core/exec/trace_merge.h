#pragma once
/// The traced actions of a multi-process run, brought to one process: each process writes
/// the ActionRecords of the stages it runs (and their memory peaks) as text, with its clock
/// reading at a common instant; the process that writes the records reads them back onto
/// its own clock (DistributedExecutor::merge_stats).
#include <string>
#include <vector>

#include "core/exec/executor.h"

namespace pipelab {

/// The records and peaks of `stages` in `stats`, as text, with `now`: this process's
/// seconds since stats.origin, read right after a barrier that every process passed.
std::string encode_trace(const ExecStats& stats, const std::vector<int>& stages, double now);

/// Adds what another process's encode_trace wrote to `stats`, its times moved onto this
/// process's clock: `now` is this process's reading after the same barrier, so a time t
/// there is t + (now - its now) here. Records are appended to their stage; peaks replace.
void decode_trace(const std::string& text, double now, ExecStats& stats);

}  // namespace pipelab
