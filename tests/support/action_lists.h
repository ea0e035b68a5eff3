#pragma once
/// What a run executed, device by device, as schedules write actions ("0F1", "1ALLREDUCE",
/// "0U"): for tests that hold a printed or planned schedule against metrics/actions.csv.
#include <map>
#include <string>
#include <vector>

namespace pipelab::testing {

using ActionLists = std::map<int, std::vector<std::string>>;  // device -> actions

/// The first as many actions per device as `like` holds, from `run`/metrics/actions.csv
/// (run.trace: true), in the order each device ran them.
ActionLists executed_actions(const std::string& run, const ActionLists& like);

}  // namespace pipelab::testing
