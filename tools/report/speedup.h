#pragma once
/// `pipelab table --speedup-vs scheme=dp`: every cell's runs as speed-ups over a baseline
/// cell, the form of the seeds' "Speed up" columns (gpipe_test: 1x for data parallelism on
/// 2 GPUs, 0.607x for its pipeline) and of time-to-accuracy claims (PACI's 1.69x over
/// 1F1B-flush). A time (a path ending in seconds: time_to_target.*.simulated_seconds,
/// simulated.step_seconds) speeds up as baseline / cell; a rate (samples_per_second,
/// simulated.samples_per_second) as cell / baseline. Any other metric is refused.
#include <string>
#include <vector>

#include "tools/report/run_index.h"
#include "tools/report/table.h"

namespace pipelab::tools {

/// Replaces each cell's values by each run's speed-up over the mean of the baseline's runs
/// (those matching every key=value of `table.options.speedup_vs`: in the cell's row when the
/// baseline has runs there, else anywhere), so that mean ± std and a published speed-up
/// (--reference) read as they do for any metric. The baseline must be one cell per row; a
/// condition matching no finished run, or several cells, is a UserError saying which.
void apply_speedup(ResultTable& table, const std::vector<RunInfo>& runs);

}  // namespace pipelab::tools
