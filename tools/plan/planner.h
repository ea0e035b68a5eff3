#pragma once
/// `pipelab plan`: which pipeline to run for a model on N devices. The planner enumerates
/// the candidates (scheme, model stages, replicas, virtual stages, micro-batches,
/// recomputation), compiles each into the run plan `pipelab run` would execute
/// (core/plan/run_plan.h), prunes what cannot fit or cannot win analytically, replays the
/// survivors in the event simulator (tools/simulate/simulate.h), and searches the partition
/// of the best ones on their own schedule rather than on per-block costs. One device
/// (`single`) and pure data parallelism (`dp`) are candidates like any pipeline.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/experiment/experiment.h"
#include "core/plan/topology.h"
#include "tools/simulate/simulate.h"

namespace pipelab::plan {

/// "1.23 GiB", "45.6 MiB", "7.8 KiB": bytes as the planner reports them.
inline std::string bytes_text(double bytes) {
  const double kib = 1024.0, mib = kib * 1024, gib = mib * 1024;
  if (bytes >= gib) return fmt::format("{:.3g} GiB", bytes / gib);
  if (bytes >= mib) return fmt::format("{:.3g} MiB", bytes / mib);
  return fmt::format("{:.3g} KiB", bytes / kib);
}
/// "1.23 s", "45.6 ms", "7.8 us".
inline std::string seconds_text(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

/// One candidate: what a run would take, and what the simulator says of it.
struct Candidate {
  /// The scheme section (type, chunks or micro_batches, virtual_stages, ...) as the planner
  /// chose it, behind a pointer: assigning a YAML::Node writes through to the node it shares
  /// (and merges their memories), so a candidate that sorting assigns must not hold one.
  std::shared_ptr<const YAML::Node> section;
  /// The scheme `section` makes, made once: the compiled plans of the analytic figures and of
  /// each replay read it.
  std::shared_ptr<const Scheme> scheme;
  std::string label;          ///< "zb_h1 chunks=8"
  int stages = 1;             ///< model stages (partition.stages)
  int replicas = 1;           ///< copies of the pipeline (partition.replicas, or dp's own)
  Topology topology;          ///< where its stages sit (the compiled plan's, core/plan/topology.h)
  int micro_batches = 1;      ///< per mini-batch and replica (a scheme whose unit is a mini-batch: its own)
  bool flushed = true;        ///< flushed per mini-batch (else the step is the steady state of a running pipeline)
  std::vector<int> balance;   ///< blocks per stage
  bool searched_cut = false;  ///< the balance was searched on the schedule (else FLOPs-balanced, or given)
  /// A lower bound of the step: each device's compute, after (flushed per mini-batch) the
  /// first micro-batch's forwards through the stages ahead of it; the largest over devices.
  double bound = 0;
  double static_bytes = 0;    ///< the most one device holds before any activation
  bool simulated = false;
  int replayed_micro_batches = 0;  ///< micro-batches its replay covered (RunPlan::step)
  double step = 0, samples_per_second = 0, bubble = 0, peak = 0, bytes = 0;
  /// The boundaries' codecs, when the planner chose them (`--compress-below`: none, or the
  /// codec on every boundary); null: the file's compression section, as a run of it has.
  std::shared_ptr<const CompressionSection> compression;
  /// The pipeline stages the planner recomputes to fit the memory cap (partition.recompute:
  /// the file's stages and these); empty: the file's choice, as a run of it has.
  std::vector<int> recompute;
  /// The pipeline stages the planner offloads to fit the memory cap, and the share of their
  /// micro-batches (partition.offload, with prefetch 1); empty: none.
  std::vector<int> offload;
  double offload_fraction = 0;
  std::vector<double> peaks;  ///< per device
  /// Per device, its peak above its weights (every version), optimizer state and buffers:
  /// activations, transients and the gradients, what a run's meter measures (costs.json's
  /// peak_activation_bytes, per stage).
  std::vector<double> peaks_above_weights;
  /// Updates of stage 0 between a micro-batch's forward and its backward: the weight
  /// versions its gradient is stale by (0 for synchronous schedules).
  int staleness = 0;
  std::string lost;  ///< why it is not ranked ("" when it is)
};

/// What to search and under which constraints.
struct PlanSpace {
  std::vector<std::string> schemes;  ///< registered scheme types to try
  int devices = 1;
  bool allow_idle = false;       ///< candidates may leave devices idle (D x R < N)
  double memory_cap = 0;         ///< bytes per device (0: none)
  /// The costs know each device's host link (`host_gbps`): offloading activations is a
  /// memory lever beside recomputation (tools/plan/offload_fit.h).
  bool offload = false;
  /// Ragged text (`--tokens`): the mean length of a step's sequences, which each candidate's
  /// micro-batches are costed at (tools/simulate/unit_scale.h); 0: the costs' own length.
  double token_length = 0;
  int max_staleness = 0;         ///< weight versions a gradient may be stale by (0: synchronous only)
  double time_limit = 10;        ///< seconds for the whole search
  int batch = 1;                 ///< run.batch_size
  std::vector<double> block_flops;  ///< per block (the FLOPs-balanced cut; its size is the block count)
  /// Whether costs follow any partition (derived costs) or only the given one (measured).
  bool repartition = true;
  int measured_stages = 0;          ///< the stages measured costs are for, when !repartition
  std::vector<int> fixed_balance;   ///< the measured run's partition, when known
  int top = 10;                  ///< candidates ranked in full
  /// Keep the `top` best of each kind of numerics (synchronous, the others) from the bound's
  /// pruning, not the `top` best of all: `plan --target` weighs the asynchronous plans
  /// against the synchronous ones they may outrun per step but not per target.
  bool rank_apart = false;
  /// Codecs to try on every boundary (the link is slower than `--compress-below`): each
  /// candidate of several stages is tried without compression and with this section. Null:
  /// every candidate keeps the file's compression section.
  std::shared_ptr<const CompressionSection> compress;
};

/// Costs of one pipeline's stages cut as `balance`, for units of `examples` examples, with
/// `compression` on its boundaries.
using CostsOf = std::function<sim::SimCosts(const std::vector<int>& balance, double examples,
                                            const CompressionSection& compression)>;

struct PlanResult {
  std::vector<Candidate> ranked;  ///< fastest simulated step first
  std::vector<Candidate> lost;    ///< with why each lost
  int64_t enumerated = 0, simulated = 0;
  double seconds = 0;
  bool timed_out = false;
};

/// Hears of the search: candidates looked at of all, and the best step so far (0: none yet).
using OnProgress = std::function<void(int64_t done, int64_t total, double best_step)>;

/// The table's order: the shorter step (to 6 significant digits), then the simpler plan
/// (fewer devices, fewer stages, less memory). The winner and the front's order agree.
bool ranks_before(const Candidate& a, const Candidate& b);

/// Searches `space` for experiment `e` (its model, optimizer, gradient options, scheme
/// options of the file's own scheme type).
PlanResult search(const Experiment& e, const PlanSpace& space, const CostsOf& costs, const sim::SimOptions& options,
                  const OnProgress& on_progress = {});

/// The schemes tried by default, asked of the registry: every scheme whose step is
/// synchronous (Scheme::numerics; `single` and `dp` included) and, with `async`, the
/// asynchronous ones; with `sequences` (a model that computes a sequence segment by
/// segment), those that cut sequences too. Another algorithm (local losses) is never tried.
std::vector<std::string> default_schemes(bool async, bool sequences = false);

}  // namespace pipelab::plan
