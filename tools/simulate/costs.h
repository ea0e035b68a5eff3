#pragma once
/// What `pipelab simulate` replays a schedule with: per stage, the seconds of each action and
/// the bytes it moves and holds. Three sources, one format:
/// - measured: the metrics/costs.json a `pipelab run` writes (core/train/stage_costs.h);
/// - given: the same keys in a YAML file written by hand (docs/simulate.md);
/// - derived: from the model's FLOPs and a device spec (derive.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/schedule/action_kinds.h"
#include "tools/simulate/size_curve.h"

namespace pipelab::sim {

/// Ranges of the values a costs file gives (a bigger one is a typo that would turn every
/// sum into inf): seconds of an action, bytes, examples per micro-batch (0: unknown).
inline const InRange kSeconds = in_range(0, 1e6);
inline const InRange kBytes = in_range(0, 1e15);
struct ExamplesCheck {
  std::string operator()(double v) const { return v == 0 || (v >= 1e-3 && v <= 1e9) ? "" : "0 or a number in [0.001, 1e9]"; }
};
inline constexpr ExamplesCheck kExamples{};

/// The keys of one compute kind in a costs file, from the kind table.
struct KindKeys {
  ActionKind kind;
  std::string seconds, transient, seconds_doc, transient_doc;
};
/// One per compute kind, in table order.
const std::vector<KindKeys>& kind_keys();

/// One pipeline stage, for one micro-batch of `SimCosts::micro_batch_size` examples.
struct StageCosts {
  /// Per compute kind, seconds of one action (key: the kind table's cost key, "forward";
  /// I and W without a figure: half a B).
  PerKind<double> seconds;
  double activation_bytes = 0;  ///< sent forward per micro-batch (0 on the last stage)
  double gradient_bytes = 0;    ///< sent back per micro-batch (0 on stage 0)
  double retained_bytes = 0;    ///< held from a micro-batch's F until its backward ends
  /// Held, on top, by every forward action whatever its share of a micro-batch (a sequence
  /// segment's too): under autocast, the compute-dtype copies of the weights its matrix
  /// products read. Derived costs only (measured retained_bytes include it); not a file key.
  double retained_fixed_bytes = 0;
  /// Held from a split backward's I until its W: the gradients W starts from (arriving at
  /// each weight's node; core/stage/weight_pass.h), as large as the activations they match.
  double backward_input_kept_bytes = 0;
  /// What an OFFLOAD moved of one micro-batch, measured (0: unmeasured). Less than
  /// retained_bytes where something else holds a saved tensor: the stage's input and output
  /// stay (core/stage/saved_tensors.h).
  double offload_bytes = 0;
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
  double peak_activation_bytes = 0;  ///< measured peak of activations (for validation; not replayed)
  /// Measured peak of the same bytes of every stage on the stage's device together
  /// (validation; not replayed).
  double device_peak_bytes = 0;
  double host_peak_bytes = 0;  ///< measured peak of its device's offloaded activations (validation only)
  /// On a GPU, its CUDA caching allocator's peaks over the whole run (every stage on that GPU,
  /// weights, optimizer state and cuDNN workspaces included; validation only).
  double cuda_allocated_peak_bytes = 0, cuda_reserved_peak_bytes = 0;
  int cuda_device = -1;  ///< that GPU's index (-1: the stage ran on the CPU)
  /// Per compute kind, the bytes an action needs above the level at its start while it
  /// runs (key: "<cost key>_transient_bytes"; I and W with no figure of their own, neither
  /// seconds nor bytes: B's).
  PerKind<double> transient_bytes;
  /// Whether the backward's transient includes the forward it recomputes: measured in a run
  /// that recomputed, it does; derived from blocks measured one at a time, it does not, and
  /// the replay adds the recomputed activations.
  bool recompute_in_transient = true;
  double parameter_bytes = 0, buffer_bytes = 0, optimizer_bytes = 0;
  /// Bytes of its parameters tied to another pipeline stage's (an embedding and the output
  /// head): their gradients meet in the ALLREDUCE before each update.
  double tied_bytes = 0;
  double stored_versions = 1;  ///< weight versions the measured scheme held (informational)
  /// Seconds to copy the stage's parameters once: replayed for every copy its scheme's
  /// actions make (a version stashed, swapped in or put back; Scheme::weight_work). 0 in a
  /// run's costs.json, whose measured forward and backward times include the copies.
  double weight_copy_seconds = 0;
  /// Seconds to predict the stage's weights once from its optimizer's state (SpecTrain's,
  /// PipeOptim's, XPipe's predictors): replayed per prediction its scheme's actions make, as
  /// the copies are. Its update's seconds where derived or timed per block (a prediction
  /// moves what an update moves: core/schedule/weight_copies.h); 0 in a run's costs.json.
  double prediction_seconds = 0;
  /// Seconds per micro-batch the boundary codecs take on the stage's forward (encoding the
  /// activation it sends, decoding the one it receives) and on its backward (the gradients);
  /// replayed as part of F and of the action that takes the gradient (B, or I).
  double codec_forward_seconds = 0, codec_backward_seconds = 0;
  int stage = 0, device = 0;   ///< as measured (informational)
  /// Measured in sequence segments (SimCosts::segments): each segment's part of the stage's
  /// compute seconds (F, B, I, W), segment 0 first; empty when not measured so.
  std::vector<double> segment_shares;
  /// Derived from blocks timed here (--time-blocks): the stage's forward plus backward
  /// seconds at the timed micro-batch sizes. A sequence segment holding t of a micro-batch's
  /// tokens then costs what as many tokens of whole sequences cost, its kernels' fixed costs
  /// included, not t of the micro-batch's seconds (Seq1F1B's short segments ran up to 1.7x
  /// that). Empty otherwise. Not a file key.
  SizeCurve timed_seconds;

  template <class V>
  void fields(V& v) {
    v("stage", stage, "stage index (informational)", in_range(0, 1 << 16));
    v("device", device, "device it ran on (informational)", in_range(0, 1 << 16));
    for (const KindKeys& k : kind_keys()) v(k.seconds, seconds[k.kind], k.seconds_doc.c_str(), kSeconds);
    v("activation_bytes", activation_bytes, "bytes sent forward per micro-batch", kBytes);
    v("gradient_bytes", gradient_bytes, "bytes sent back per micro-batch", kBytes);
    v("retained_bytes", retained_bytes, "bytes one in-flight micro-batch holds until its backward", kBytes);
    v("backward_input_kept_bytes", backward_input_kept_bytes, "bytes a split backward's I keeps until its W", kBytes);
    v("offload_bytes", offload_bytes, "bytes an OFFLOAD moved of one micro-batch (0: unmeasured, taken as what it keeps less its output)", kBytes);
    v("peak_activation_bytes", peak_activation_bytes, "measured activation peak (validation only)", kBytes);
    v("device_peak_bytes", device_peak_bytes, "measured peak of the stage's device, all its stages (validation only)",
      kBytes);
    v("host_peak_bytes", host_peak_bytes,
      "measured peak of the activations the stage's device offloaded to the host (validation only)", kBytes);
    v("cuda_device", cuda_device, "the GPU the stage ran on (-1: the CPU; validation only)", in_range(-1, 1 << 16));
    v("cuda_allocated_peak_bytes", cuda_allocated_peak_bytes,
      "the GPU caching allocator's peak of bytes in tensors over the run (validation only)", kBytes);
    v("cuda_reserved_peak_bytes", cuda_reserved_peak_bytes,
      "the GPU caching allocator's peak of bytes reserved from the driver (validation only)", kBytes);
    for (const KindKeys& k : kind_keys()) v(k.transient, transient_bytes[k.kind], k.transient_doc.c_str(), kBytes);
    v("parameter_bytes", parameter_bytes, "bytes of the stage's parameters", kBytes);
    v("segment_shares", segment_shares, "each sequence segment's part of the compute seconds (measured in segments)");
    v("tied_bytes", tied_bytes, "bytes of its parameters tied to another stage's (summed before each update)", kBytes);
    v("buffer_bytes", buffer_bytes, "bytes of its buffers (batch-norm statistics)", kBytes);
    v("optimizer_bytes", optimizer_bytes, "bytes of its optimizer state", kBytes);
    v("stored_versions", stored_versions, "weight versions the measured scheme held", in_range(0, 1e6));
    v("weight_copy_seconds", weight_copy_seconds,
      "seconds to copy the stage's parameters once, replayed per copy its scheme makes (0: included in the times)",
      kSeconds);
    v("prediction_seconds", prediction_seconds,
      "seconds to predict the stage's weights once, replayed per prediction its scheme makes (0: included in the times)",
      kSeconds);
    v("codec_forward_seconds", codec_forward_seconds,
      "seconds per micro-batch of the boundary codecs on the forward (encode what it sends, decode what it receives)",
      kSeconds);
    v("codec_backward_seconds", codec_backward_seconds, "the same for the gradients on the backward", kSeconds);
  }
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

struct SimCosts {
  std::vector<StageCosts> stages;
  LinkSpec link;
  double micro_batch_size = 0;  ///< examples the costs are for (0: unknown; cannot be rescaled)
  double step_seconds = 0;      ///< measured step, when the costs were measured
  int micro_batches = 0;        ///< micro-batches per step of the measured run (0: unknown)
  /// Sequence segments per micro-batch of the measured run (Seq1F1B, TeraPipe): its actions'
  /// figures are then one segment's, on average; 1 for whole micro-batches.
  int segments = 1;
  /// Tokens per example (0: unknown, or not sequences): what a plan that cuts sequences into
  /// segments needs to cost each segment (core/scheme/sequence_split.h).
  double sequence_length = 0;
  /// Measured on ragged text: the micro-batches differed in length, and each figure is their
  /// mean (so it cannot be scaled to other lengths: which length it stands for is not known).
  bool ragged = false;
  int steps = 0;                ///< mini-batches the measured step time is the mean of
  std::string executor, scheme, dtype, format;
  /// The measured run's compression section ("" without one): its sizes are encoded already.
  std::string compression;
  int version = 1;
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
    v("format", format, "pipelab-stage-costs");
    v("version", version, "format version (1)", positive);
    v.section("link", link, "the link between devices");
    v("micro_batch_size", micro_batch_size, "examples per micro-batch the costs are for (0: unknown)", kExamples);
    v("step_seconds", step_seconds, "measured seconds of one step", kSeconds);
    v("micro_batches", micro_batches, "micro-batches per step of the measured run", in_range(0, 1e9));
    v("segments", segments, "sequence segments per micro-batch of the measured run (1: whole micro-batches)",
      in_range(1, 1 << 16));
    v("sequence_length", sequence_length, "tokens per example (0: unknown or not sequences)", in_range(0, 1e9));
    v("ragged", ragged, "measured on ragged text: the figures are means over micro-batches of differing lengths");
    v("steps", steps, "steps the measured time averages", in_range(0, 2e9));
    v("executor", executor, "executor of the measured run");
    v("scheme", scheme, "scheme of the measured run");
    v("dtype", dtype, "element type of the measured run");
    v("compression", compression, "the measured run's compression section (its sizes are the encoded ones)");
  }

  /// The costs of micro-batches of `examples` examples: seconds and activation bytes scale
  /// linearly (an assumption: it ignores a kernel's fixed costs), weights do not.
  SimCosts scaled_to(double examples) const;
};

/// Reads a costs file (JSON or YAML); errors name the file, the line:column and the key.
SimCosts load_costs(const std::string& path);

}  // namespace pipelab::sim
