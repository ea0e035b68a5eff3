#pragma once
/// What `pipelab simulate` replays a schedule with: per stage, the seconds of each action and
/// the bytes it moves and holds. Three sources, one format:
/// - measured: the metrics/costs.json a `pipelab run` writes (core/records/stage_costs.h);
/// - given: the same keys in a YAML file written by hand (docs/simulate.md);
/// - derived: from the model's FLOPs and a device spec (derive.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/records/cost_record.h"
#include "core/schedule/action_kinds.h"
#include "tools/simulate/size_curve.h"

namespace pipelab::sim {

/// One pipeline stage, for one micro-batch of `SimCosts::micro_batch_size` examples: a costs
/// file's entry (its keys: core/records/cost_record.h) and what only derived costs set.
struct StageCosts : StageCostRecord {
  /// Held, on top, by every forward action whatever its share of a micro-batch (a sequence
  /// segment's too): under autocast, the compute-dtype copies of the weights its matrix
  /// products read. Derived costs only (measured retained_bytes include it); not a file key.
  double retained_fixed_bytes = 0;
  /// The stage's output as its forward made it (uncompressed), which the stage keeps until
  /// its backward and an OFFLOAD never moves; 0: activation_bytes. Not a file key: derived
  /// costs set it before a codec shrinks activation_bytes.
  double output_bytes = 0;
  /// The bytes an OFFLOAD moves of one micro-batch: as measured, else what it keeps less its
  /// output (a one-block stage whose saved tensors are its input and output moves nothing).
  double offloaded_bytes() const {
    if (offload_bytes > 0) return std::min(offload_bytes, retained_bytes);
    return std::max(0.0, retained_bytes - (output_bytes > 0 ? output_bytes : activation_bytes));
  }
  /// Whether the backward's transient includes the forward it recomputes: measured in a run
  /// that recomputed, it does; derived from blocks measured one at a time, it does not, and
  /// the replay adds the recomputed activations.
  bool recompute_in_transient = true;
  /// Derived from blocks timed here (--time-blocks): the stage's forward plus backward
  /// seconds at the timed micro-batch sizes. A sequence segment holding t of a micro-batch's
  /// tokens then costs what as many tokens of whole sequences cost, its kernels' fixed costs
  /// included, not t of the micro-batch's seconds (Seq1F1B's short segments ran up to 1.7x
  /// that). Empty otherwise. Not a file key.
  SizeCurve timed_seconds;

  /// Seconds of an action of kind `k` (0 for communication; the fallback's share without a
  /// figure of its own).
  double seconds_of(ActionKind k) const;
  /// Transient bytes of an action of kind `k` (the fallback's when `k` has no seconds and no
  /// transient of its own).
  double transient_of(ActionKind k) const;
};

/// The link between any two devices.
struct LinkSpec {
  double gbps = 0;        ///< bandwidth in gigabits per second (0: infinite)
  double latency_us = 0;  ///< per message
  /// What an all-reduce moves per second, Gbit/s of each member's ring bytes, when it runs
  /// through one host's memory rather than the link (the threaded executor's replicas sum
  /// their gradients in place: a message there is a handle, a sum is not); 0: the link's.
  double reduce_gbps = 0;
  /// Devices per node (0: every device on one node): a message or a ring between devices of
  /// different nodes (device / devices_per_node) takes the slower link between nodes.
  int devices_per_node = 0;
  double inter_gbps = 0, inter_latency_us = 0;  ///< the link between nodes
  /// The link between each device and its host's memory (PCIe), which OFFLOAD and RELOAD
  /// occupy, one copy at a time each way, beside compute.
  double host_gbps = 0, host_latency_us = 0;
  /// How many times slower a device computes while a message to or from it, or a copy
  /// between it and its host, is in flight (tools/simulate/contention.h); 1: for free.
  double overlap_slowdown = 1;
  template <class V>
  void fields(V& v) {
    v("gbps", gbps, "bandwidth, Gbit/s (0: infinite)", in_range(0, 1e9));
    v("latency_us", latency_us, "latency per message, microseconds", in_range(0, 1e9));
    v("reduce_gbps", reduce_gbps,
      "an all-reduce's speed through one host's memory, Gbit/s of each member's ring bytes (0: the link's)",
      in_range(0, 1e9));
    v("devices_per_node", devices_per_node, "devices per node (0: all on one node)", in_range(0, 1e6));
    v("inter_gbps", inter_gbps, "bandwidth between nodes, Gbit/s (0: infinite)", in_range(0, 1e9));
    v("inter_latency_us", inter_latency_us, "latency per message between nodes, microseconds", in_range(0, 1e9));
    v("host_gbps", host_gbps, "bandwidth between a device and its host's memory, Gbit/s each way (0: infinite)",
      in_range(0, 1e9));
    v("host_latency_us", host_latency_us, "latency per copy to or from the host, microseconds", in_range(0, 1e9));
    v("overlap_slowdown", overlap_slowdown,
      "how many times slower compute runs while a message to or from its device is in flight (1: overlap is free)",
      in_range(1, 10));
  }
  /// Seconds a copy of `bytes` to or from the host takes (OFFLOAD, RELOAD).
  double host_seconds(double bytes) const {
    return (host_gbps > 0 ? bytes * 8 / (host_gbps * 1e9) : 0) + host_latency_us * 1e-6;
  }
  /// Whether devices `a` and `b` are on different nodes.
  bool across_nodes(int a, int b) const { return devices_per_node > 0 && a / devices_per_node != b / devices_per_node; }
  /// The link between nodes, as a link of its own.
  LinkSpec between_nodes() const {
    LinkSpec l;
    l.gbps = inter_gbps;
    l.latency_us = inter_latency_us;
    return l;
  }
  /// Seconds `bytes` occupy the link.
  double wire_seconds(double bytes) const { return gbps > 0 ? bytes * 8 / (gbps * 1e9) : 0; }
  /// Seconds an all-reduce member's `bytes` of ring traffic take.
  double reduce_seconds(double bytes) const {
    return reduce_gbps > 0 ? bytes * 8 / (reduce_gbps * 1e9) : wire_seconds(bytes);
  }
  double latency_seconds() const { return latency_us * 1e-6; }
};

/// A costs file's scalar keys (core/records/cost_record.h), its link and its stages.
struct SimCosts : CostRecord {
  std::vector<StageCosts> stages;
  LinkSpec link;
  /// "measured: runs/x/metrics/costs.json", "given: my.yaml", "derived: ..."
  std::string source;
  /// [k - 1]: how much longer compute takes while k devices compute at once, for devices that
  /// share one host (the threads --time-blocks costs: BlockTimes::busy_slowdown); empty for
  /// devices of their own, and for measured costs, whose seconds were taken busy together.
  /// Not a file key.
  std::vector<double> busy_slowdown;

  /// The scalar keys and `link`; `stages` (a list of StageCosts) is read by load_costs.
  template <class V>
  void fields(V& v) {
    CostRecord::fields(v);
    v.section("link", link, "the link between devices");
  }

  /// The costs of micro-batches of `examples` examples: seconds and activation bytes scale
  /// linearly (an assumption: it ignores a kernel's fixed costs), weights do not.
  SimCosts scaled_to(double examples) const;
};

/// Reads a costs file (JSON or YAML); errors name the file, the line:column and the key.
SimCosts load_costs(const std::string& path);

}  // namespace pipelab::sim
