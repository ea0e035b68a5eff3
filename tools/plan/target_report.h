#pragma once
/// What `pipelab plan --target` shows (tools/plan/proxy_runs.h): the proxy runs, the plans
/// ranked by time to the target beside their throughput rank, and why the two rankings'
/// winners differ.
#include <string>
#include <vector>

#include "tools/plan/proxy_runs.h"

namespace pipelab::plan {

/// The candidates proxied (the first `top` of `ranked`), by time to the target: the
/// reached ones fastest first, then those that did not reach it by their throughput rank.
/// Indices into `ranked`.
std::vector<size_t> target_order(const std::vector<Candidate>& ranked, const std::vector<double>& times);

/// One line per proxy run: its family, steps to the target (or how far it got), cached or not.
std::string proxy_lines(const TimeToTarget& t, int64_t budget);

/// | # | scheme | stages x replicas | stale | step | steps to target | time to target | throughput rank |
/// The first `top` rows of `order`.
std::string target_table(const std::vector<Candidate>& ranked, const TimeToTarget& t, const std::vector<double>& times,
                         const std::vector<size_t>& order, int top);

/// "test_loss <= 2": the target, as the proxy runs read it.
std::string target_heading(const TimeToTarget& t);

/// The winner by time to the target and, when the fastest step is another plan, why they
/// differ: the steps each needs (staleness) against the time of each step (bubble).
std::string target_why(const std::vector<Candidate>& ranked, const TimeToTarget& t, const std::vector<double>& times,
                       const std::vector<size_t>& order);

}  // namespace pipelab::plan
