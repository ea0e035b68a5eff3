#pragma once
/// Cutting a model's blocks into D consecutive stages: `balance: [n1, n2, ...]` (blocks per
/// stage), a model's named split, or an optimal contiguous split (the largest stage cost as
/// small as possible, by dynamic programming) of a measured per-block cost: `params`,
/// `flops`, `time` (forward + backward, profiled on the run's device) or `memory`.
/// `auto` is `flops` (docs/models-and-data.md, "Balance": it measured as fast as `time`, and it is
/// deterministic). A `time` split is settled by the runner: process 0's in a multi-process
/// run, the saved one on --resume (RunBuilder::settled_time_balance).
#include <functional>
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/schedule/place.h"

namespace pipelab {

/// `auto`, a measured cost, a list of block counts, or the name of a split the model defines.
struct Balance {
  enum class Kind { Auto, Params, Flops, Time, Memory, Counts, Named } kind = Kind::Auto;
  std::vector<int> counts;
  std::string name;
};

/// What `balance: auto` stands for.
inline constexpr Balance::Kind kAutoBalance = Balance::Kind::Flops;

/// The cost of every block under a measured kind (Params, Flops, Time or Memory).
using BlockCostFn = std::function<std::vector<double>(Balance::Kind)>;

template <>
struct ConfigValue<Balance> {
  static std::string type() { return "auto, a list of blocks per stage, or a named split"; }
  static Balance read(const ConfigNode& n);
  static YAML::Node write(const Balance& b);
};

/// `partition.replicas`: R copies of the whole pipeline (data parallelism x pipeline
/// parallelism), or per pipeline stage its own count ([2, 1, 1]: PipeDream's replicated
/// stages, core/schedule/stage_layout.h).
struct Replicas {
  int count = 1;               ///< copies of the whole pipeline (1 with per_stage)
  std::vector<int> per_stage;  ///< empty, or one count per pipeline stage (not all equal)
  bool operator==(const Replicas& o) const { return count == o.count && per_stage == o.per_stage; }
};

template <>
struct ConfigValue<Replicas> {
  static std::string type() { return "a positive integer, or a list of one per stage like [2, 1, 1]"; }
  static Replicas read(const ConfigNode& n);
  static YAML::Node write(const Replicas& r);
};

/// `partition.recompute`: the pipeline stages whose forwards keep only their input and run
/// again inside their backward (activation checkpointing, stage by stage as AdaPipe plans
/// it), for any scheme; a scheme's own choice (GPipe's `checkpoint`) adds to it.
struct Recompute {
  enum class Kind { Never, ExceptLast, Always, Stages } kind = Kind::Never;
  std::vector<int> stages;  ///< with Kind::Stages: pipeline stages, ascending, no repeats
  /// Per pipeline stage of a pipeline of `count`, whether it recomputes (Stages: the caller
  /// has checked them against `count`).
  std::vector<bool> of(int count) const;
  bool operator==(const Recompute& o) const { return kind == o.kind && stages == o.stages; }
};

template <>
struct ConfigValue<Recompute> {
  static std::string type() { return "never, except_last, always, or a list of pipeline stages like [0, 1]"; }
  static Recompute read(const ConfigNode& n);
  static YAML::Node write(const Recompute& r);
};

/// `partition.offload`: the pipeline stages whose kept activations go to host memory between
/// a forward and its backward for some micro-batches (PipeOffload, arXiv 2503.01328; the pass
/// core/schedule/offload.h). `none` (the default), or the stages with the share of their
/// micro-batches and how far ahead of the backward to bring them back.
struct Offload {
  Recompute stages{Recompute::Kind::Never, {}};  ///< never: no offload
  double fraction = 0.5;                         ///< of each stage's micro-batches, the longest-lived first
  int prefetch = 1;                              ///< compute actions between a RELOAD and the backward it serves
  /// The blocks whose saved activations move (PipeOffload's per-layer choice); empty: every
  /// block of an offloading stage, and its loss.
  std::vector<std::string> blocks;
  bool any() const { return stages.kind != Recompute::Kind::Never; }
  template <class V>
  void fields(V& v) {
    v("stages", stages, "the pipeline stages that offload: except_last, always, or a list like [0, 1]");
    v("fraction", fraction, "the share of each stage's micro-batches offloaded, the longest-lived first",
      in_open_low(0, 1));
    v("prefetch", prefetch, "compute actions of the stage's device between a RELOAD and the backward it serves",
      in_range(0, 1 << 16));
    v("blocks", blocks,
      "the blocks whose saved activations move, by name (`pipelab describe`), e.g. [layer2, layer3]; default: every "
      "block of an offloading stage");
  }
  bool operator==(const Offload& o) const {
    return stages == o.stages && fraction == o.fraction && prefetch == o.prefetch && blocks == o.blocks;
  }
};

template <>
struct ConfigValue<Offload> {
  static std::string type() { return "none, or a map {stages: [0, 1], fraction: 0.5, prefetch: 1}"; }
  static Offload read(const ConfigNode& n);
  static YAML::Node write(const Offload& o);
};

/// The `partition:` section.
struct PartitionOptions {
  int stages = 1;
  Replicas replicas;
  Balance balance;
  Placement placement;
  Recompute recompute;
  Offload offload;
  template <class V>
  void fields(V& v) {
    v("stages", stages, "number of pipeline stages D", positive);
    v("replicas", replicas,
      "copies of the whole pipeline (data parallelism x pipeline parallelism): each takes its share of every "
      "mini-batch, and the copies of a stage all-reduce their gradients before its update; or a count per stage "
      "([2, 1, 1], pipedream): PipeDream's replicated stages, mini-batches dealt round robin (1F1B-RR)");
    v("balance", balance,
      "blocks per stage: auto (= flops), params, flops, time, memory (optimal splits of a measured cost), "
      "[n1, n2, ...], or a named split");
    v("placement", placement,
      "the device of each stage: scheme (the scheme's own), client_server (the first and the last stage on device 0, "
      "the middle ones on 1.., as gpipe_test's client and servers), or [d0, d1, ...]; each stage keeps its order of "
      "actions, so the numbers do not change");
    v("recompute", recompute,
      "pipeline stages whose forwards keep only their input and run again in their backward (activation "
      "checkpointing): never, except_last (every stage but the last), always, or a list like [0, 1]; with any "
      "scheme, and added to a scheme's own checkpoint choice. The recomputed forward reads the weights its "
      "backward reads: the forward's on a flushed schedule and under weight stashing");
    v("offload", offload,
      "what some micro-batches' forwards keep goes to host memory until shortly before their backward (PipeOffload): "
      "none, or {stages: [0, 1], fraction: 0.5, prefetch: 1} (stages as for recompute; the longest-lived fraction "
      "of each stage's micro-batches; reloaded prefetch compute actions ahead of the backward). A stage offloads or "
      "recomputes, not both");
  }
};

/// Contiguous split of `weights` into `parts` non-empty groups minimising the largest group
/// sum (ties: earlier cuts). Requires weights.size() >= parts.
std::vector<int> balance_by_weight(const std::vector<double>& weights, int parts);

/// Blocks per stage for `stages` stages of a model of `blocks` blocks; `costs` measures a
/// kind when the balance asks for one. Problems are ConfigErrors at `partition.balance`.
std::vector<int> resolve_balance(const Balance& balance, int stages, int blocks, const BlockCostFn& costs,
                                 const std::map<std::string, std::vector<int>>& named,
                                 const ConfigSource& source);

/// The name of a measured kind ("flops").
const char* balance_name(Balance::Kind kind);

}  // namespace pipelab
