#pragma once
/// `pipelab plan --target`: time to a target for the plans the planner ranks. A scheme's
/// numerics do not depend on where its stages run, so the steps a plan needs to reach the
/// target can be counted on this CPU, exactly, from a short *proxy run*: the file's
/// experiment as the plan runs it, its model narrowed as a `cpu-mini` preset narrows it
/// (the same blocks and vocabulary, narrower layers), cut at a budget of steps. Times the
/// simulated step, that is its time to the target (docs/time-to-accuracy.md, "Planning by
/// time to a target").
///
/// Plans with the same numerics share one proxy run (a *family*): synchronous plans that cut
/// the mini-batch into as many parts (replicas x micro-batches, what a batch norm's
/// statistics see) compute the same updates (Scheme::numerics), so one run stands for all
/// of them (`single`'s for whole mini-batches); an asynchronous plan's numerics depend on its
/// scheme section, stages and replicas.
/// Runs are kept in the cache (tools/simulate/cache_key.h) under a digest of the proxy
/// experiment: asking again, or with another --memory-cap, trains nothing.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/experiment/targets.h"
#include "tools/plan/planner.h"

namespace pipelab::plan {

struct ProxyOptions {
  TargetOptions target;          ///< exactly one value set: the target the plans are ranked by
  int64_t steps = 1000;          ///< the most training steps of each proxy run (--proxy-steps)
  std::vector<std::string> sets;  ///< --proxy-set: applied to every proxy after the scaling
  bool progress = true;           ///< a line per proxy run on stderr
  /// Narrow the model as `cpu-mini` does (set by proxy_runs: for a model of more than
  /// kProxyFullWidthParameters parameters, whose full width would take this CPU too long or
  /// not fit it).
  bool narrow = false;
};

/// The most parameters a proxy trains at the file's own widths: its numbers are then exactly
/// the plan's. A larger model is narrowed (ModelFactory::miniature), and its steps to the
/// target are those of the narrowed model (docs/time-to-accuracy.md, "A proxy is as exact as
/// its scale").
inline constexpr double kProxyFullWidthParameters = 4e6;

/// One family's proxy run and what it says.
struct ProxyRun {
  std::string family;  ///< "synchronous, the mini-batch in 4 parts", "pipedream_2bw on 4 stages"
  std::string dir;     ///< its run folder, in the cache
  bool cached = false;
  std::string status;   ///< the run's (finished, diverged); empty when it could not run
  std::string refused;  ///< why the proxy could not run (the scheme refuses the optimizer, ...)
  int64_t steps_run = 0;
  TargetReached reached;  ///< its train_seconds is in steps, not seconds
  /// The metric at the proxy's last evaluation (NaN: none).
  double last_value = std::numeric_limits<double>::quiet_NaN();
};

struct TimeToTarget {
  std::vector<ProxyRun> runs;
  /// Per candidate of the ranking (in its order): its family in `runs`, -1 for those not
  /// proxied (asynchronous plans past the top rows). A refused family's candidates have no
  /// time to the target.
  std::vector<int> family_of;
};

/// The family of candidate `c`: plans with equal keys train to the same numbers.
std::string family_key(const Candidate& c);

/// The proxy experiment of candidate `c`'s family: `root` (the planned experiment, read from
/// `file` with the --set values and preset applied) running `c` (or `single`, for a
/// synchronous plan of whole mini-batches), its model narrowed, on this CPU, cut at
/// `o.steps` steps.
YAML::Node proxy_experiment(YAML::Node root, const std::string& file, const Candidate& c, const ProxyOptions& o);

/// Runs (or finds in the cache) the proxy of each family among the first `top` of `ranked`,
/// and the synchronous family wherever its best plan ranks, and returns, per candidate, its
/// family's steps to the target.
TimeToTarget proxy_runs(const YAML::Node& root, const std::string& file, const std::vector<Candidate>& ranked, int top,
                        const ProxyOptions& o);

/// The candidates' time to the target: steps to it times the simulated time of a
/// mini-batch; +inf where not reached, NaN where not proxied.
std::vector<double> times_to_target(const std::vector<Candidate>& ranked, const TimeToTarget& t);

}  // namespace pipelab::plan
