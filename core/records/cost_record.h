#pragma once
/// The keys of metrics/costs.json, listed once: a traced run writes them (stage_costs.cpp)
/// and `pipelab simulate` reads them back, from a run's file or one written by hand
/// (tools/simulate/costs.h extends these records with what only the replay derives).
/// docs/results.md describes every key and unit.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/fields.h"
#include "core/schedule/action_kinds.h"

namespace pipelab {

/// Ranges of the values a costs file gives (a bigger one is a typo that would turn every
/// sum into inf): seconds of an action, bytes, examples per micro-batch (0: unknown).
inline const InRange kCostSeconds = in_range(0, 1e6);
inline const InRange kCostBytes = in_range(0, 1e15);
struct CostExamplesCheck {
  std::string operator()(double v) const { return v == 0 || (v >= 1e-3 && v <= 1e9) ? "" : "0 or a number in [0.001, 1e9]"; }
};
inline constexpr CostExamplesCheck kCostExamples{};

/// The keys of one compute kind in a costs file, from the kind table.
struct KindCostKeys {
  ActionKind kind;
  std::string seconds, transient, seconds_doc, transient_doc;
};
/// One per compute kind, in table order.
const std::vector<KindCostKeys>& kind_cost_keys();

/// One stage's entry of `stages`, for one micro-batch of the file's micro_batch_size examples.
struct StageCostRecord {
  /// Per compute kind, seconds of one action (key: the kind table's cost key, "forward";
  /// I and W without a figure: half a B).
  PerKind<double> seconds;
  double activation_bytes = 0;  ///< sent forward per micro-batch (0 on the last stage)
  double gradient_bytes = 0;    ///< sent back per micro-batch (0 on stage 0)
  double retained_bytes = 0;    ///< held from a micro-batch's F until its backward ends
  /// Held from a split backward's I until its W: the gradients W starts from (arriving at
  /// each weight's node; core/stage/weight_pass.h), as large as the activations they match.
  double backward_input_kept_bytes = 0;
  /// What an OFFLOAD moved of one micro-batch, measured (0: unmeasured). Less than
  /// retained_bytes where something else holds a saved tensor: the stage's input and output
  /// stay (core/stage/saved_tensors.h).
  double offload_bytes = 0;
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
  /// Measured in sequence segments (the file's `segments`): each segment's part of the
  /// stage's compute seconds (F, B, I, W), segment 0 first; empty when not measured so.
  std::vector<double> segment_shares;

  template <class V>
  void fields(V& v) {
    v("stage", stage, "stage index (informational)", in_range(0, 1 << 16));
    v("device", device, "device it ran on (informational)", in_range(0, 1 << 16));
    for (const KindCostKeys& k : kind_cost_keys()) v(k.seconds, seconds[k.kind], k.seconds_doc.c_str(), kCostSeconds);
    v("activation_bytes", activation_bytes, "bytes sent forward per micro-batch", kCostBytes);
    v("gradient_bytes", gradient_bytes, "bytes sent back per micro-batch", kCostBytes);
    v("retained_bytes", retained_bytes, "bytes one in-flight micro-batch holds until its backward", kCostBytes);
    v("backward_input_kept_bytes", backward_input_kept_bytes, "bytes a split backward's I keeps until its W", kCostBytes);
    v("offload_bytes", offload_bytes,
      "bytes an OFFLOAD moved of one micro-batch (0: unmeasured, taken as what it keeps less its output)", kCostBytes);
    v("peak_activation_bytes", peak_activation_bytes, "measured activation peak (validation only)", kCostBytes);
    v("device_peak_bytes", device_peak_bytes, "measured peak of the stage's device, all its stages (validation only)",
      kCostBytes);
    v("host_peak_bytes", host_peak_bytes,
      "measured peak of the activations the stage's device offloaded to the host (validation only)", kCostBytes);
    v("cuda_device", cuda_device, "the GPU the stage ran on (-1: the CPU; validation only)", in_range(-1, 1 << 16));
    v("cuda_allocated_peak_bytes", cuda_allocated_peak_bytes,
      "the GPU caching allocator's peak of bytes in tensors over the run (validation only)", kCostBytes);
    v("cuda_reserved_peak_bytes", cuda_reserved_peak_bytes,
      "the GPU caching allocator's peak of bytes reserved from the driver (validation only)", kCostBytes);
    for (const KindCostKeys& k : kind_cost_keys()) {
      v(k.transient, transient_bytes[k.kind], k.transient_doc.c_str(), kCostBytes);
    }
    v("parameter_bytes", parameter_bytes, "bytes of the stage's parameters", kCostBytes);
    v("segment_shares", segment_shares, "each sequence segment's part of the compute seconds (measured in segments)");
    v("tied_bytes", tied_bytes, "bytes of its parameters tied to another stage's (summed before each update)", kCostBytes);
    v("buffer_bytes", buffer_bytes, "bytes of its buffers (batch-norm statistics)", kCostBytes);
    v("optimizer_bytes", optimizer_bytes, "bytes of its optimizer state", kCostBytes);
    v("stored_versions", stored_versions, "weight versions the measured scheme held", in_range(0, 1e6));
    v("weight_copy_seconds", weight_copy_seconds,
      "seconds to copy the stage's parameters once, replayed per copy its scheme makes (0: included in the times)",
      kCostSeconds);
    v("prediction_seconds", prediction_seconds,
      "seconds to predict the stage's weights once, replayed per prediction its scheme makes (0: included in the times)",
      kCostSeconds);
    v("codec_forward_seconds", codec_forward_seconds,
      "seconds per micro-batch of the boundary codecs on the forward (encode what it sends, decode what it receives)",
      kCostSeconds);
    v("codec_backward_seconds", codec_backward_seconds, "the same for the gradients on the backward", kCostSeconds);
  }
};

/// The file's scalar keys: what was measured, on what, and how. `stages` (a list of
/// StageCostRecord) and a run's `topology` are written beside them; a hand-written file may
/// add a `link` (tools/simulate/costs.h).
struct CostRecord {
  std::string format = "pipelab-stage-costs";
  int version = 1;
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
  std::string executor, scheme, dtype;
  /// The measured run's compression section in YAML's flow form ("" without one): its sizes
  /// are encoded already.
  std::string compression;

  template <class V>
  void fields(V& v) {
    v("format", format, "pipelab-stage-costs");
    v("version", version, "format version (1)", positive);
    v("micro_batch_size", micro_batch_size, "examples per micro-batch the costs are for (0: unknown)", kCostExamples);
    v("step_seconds", step_seconds, "measured seconds of one step", kCostSeconds);
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
};

}  // namespace pipelab
