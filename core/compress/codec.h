#pragma once
/// Codecs for what crosses a stage boundary (docs/compression.md): a registered component
/// (`compression: {activations: {type: sort_quant, q: 6, s: 2}, ...}`) that turns one
/// floating tensor into the tensors that travel (codes, side information) and back. Each
/// end of each stream (one boundary, one direction, one tensor of the message) has its own
/// codec object, so a codec with state (top-k's error feedback) keeps it per stream, and the
/// sender's and the receiver's copies are apart even in one process, as they are in two.
#include <ATen/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "core/config/registry.h"

namespace pipelab {

/// What a codec is told about the message it codes.
struct CodecCall {
  int boundary = 0;      ///< pipeline position of the boundary (between stages p and p+1)
  bool gradient = false;  ///< a gradient on its way back (else an activation)
  int mb = 0;            ///< the stage's own micro-batch number
  bool training = true;  ///< false in evaluation: state is not updated
  /// The micro-batch's examples (their indices in the training set, int64, one per row of
  /// dimension 0); undefined where the feed does not know them. AQ-SGD's per-example state.
  at::Tensor ids;
};

/// One end of one stream, told to its codec once, when the codec is made for it.
struct CodecStream {
  /// Unique in the run and usable as a file name ("0-1.F.t0.send"): the checkpoint's key.
  std::string name;
  int64_t examples = 0;  ///< examples in the training set (ids lie below it)
  std::string folder;    ///< where a codec may keep state on disk (created on demand)
};

class Codec : public Component {
 public:
  static constexpr const char* kKind = "codec";
  /// The tensors that carry floating tensor `x` (always `parts()` of them; their bytes are
  /// what the wire and the traffic figures count).
  virtual std::vector<at::Tensor> encode(const at::Tensor& x, const CodecCall& call) = 0;
  /// x̂ (of x's `shape` and `dtype`) from what encode() gave.
  virtual at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                            const CodecCall& call) = 0;
  virtual int parts() const = 0;
  /// Whether encode() or decode() keep state between micro-batches.
  virtual bool stateful() const { return false; }
  /// Whether it reads CodecCall::ids (the executors then ask the feed for them).
  virtual bool needs_ids() const { return false; }
  /// Why this codec cannot code that direction ("" when it can): AQ-SGD's history is of
  /// activations.
  virtual std::string refuses(bool /*gradient*/) const { return ""; }
  /// Called once, before the first encode() or decode() of the stream end it serves.
  virtual void bind(const CodecStream& /*stream*/) {}
  /// The state a checkpoint keeps (None: nothing), and its restoration (before any use).
  virtual c10::IValue state() const { return {}; }
  virtual void load_state(const c10::IValue& /*state*/) {}
  /// Bytes of state it holds (memory or disk), for the run's summary.
  virtual int64_t storage_bytes() const { return 0; }
  /// A fresh codec of the same type and options (one per stream end).
  virtual std::unique_ptr<Codec> copy() const = 0;
};

/// `x` in a type the codecs' CPU kernels compute in: bf16 and fp16 (`run.amp`) widened to
/// float32, which holds their values exactly; the decoded tensor takes the message's dtype back.
inline at::Tensor kernel_values(const at::Tensor& x) {
  return c10::isReducedFloatingType(x.scalar_type()) ? x.to(at::kFloat) : x;
}

/// Implements copy() for a Configured codec.
template <class Impl, class O>
class CodecWith : public Configured<Codec, O> {
 public:
  using Configured<Codec, O>::Configured;
  std::unique_ptr<Codec> copy() const override {
    auto out = std::make_unique<Impl>(this->options_);
    out->set_type(this->type());
    return out;
  }
};

}  // namespace pipelab
