#pragma once
/// The common part of the synchronous micro-batched schemes whose schedule is all that sets
/// them apart (interleaved 1F1B, zero-bubble, looped BFS, DualPipe-V, custom files): each
/// mini-batch is split into `chunks` micro-batches (chunk semantics, loss scaled by n_i/N as
/// in GPipe, so the run equals single-device training on the whole mini-batch), every stage
/// uses its latest weights and steps once at the end of the mini-batch (a flush).
#include "core/scheme/scheme.h"
#include "core/util/error.h"

namespace pipelab {

/// `chunks` (micro-batches per mini-batch).
struct ChunksOptions {
  int chunks = 8;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch (chunk semantics, as torchgpipe's chunks)", positive);
  }
};

/// `chunks` and `virtual_stages` (model stages per device, Megatron's v).
struct VirtualStagesOptions {
  int chunks = 8;
  int virtual_stages = 2;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch (chunk semantics, as torchgpipe's chunks)", positive);
    v("virtual_stages", virtual_stages,
      "model stages per device (v); partition.stages = devices x v, stage s on device s mod devices", positive);
  }
};

template <class O>
class SyncPipeline : public Configured<Scheme, O> {
 public:
  using Configured<Scheme, O>::Configured;
  int micro_batches() const override { return this->options_.chunks; }

 protected:
  /// The devices for `stages` stages at `per_device` stages each; a clear error when they
  /// do not divide.
  int devices_for(int stages, int per_device) const {
    if (stages < per_device || stages % per_device != 0) {
      throw UserError(fmt::format("scheme {} puts {} stages on each device, so partition.stages {} does not fit. Fix: "
                                  "set partition.stages to a multiple of {}",
                                  this->type(), per_device, stages, per_device));
    }
    return stages / per_device;
  }
};

}  // namespace pipelab
