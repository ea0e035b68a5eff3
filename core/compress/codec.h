#pragma once
/// Codecs for what crosses a stage boundary (docs/compression.md): a registered component
/// (`compression: {activations: {type: sort_quant, q: 6, s: 2}, ...}`) that turns one
/// floating tensor into the tensors that travel (codes, side information) and back. Each
/// end of each stream (one boundary, one direction, one tensor of the message) has its own
/// codec object, so a codec with state (top-k's error feedback) keeps it per stream, and the
/// sender's and the receiver's copies are apart even in one process, as they are in two.
#include <ATen/Tensor.h>

#include <vector>

#include "core/config/registry.h"

namespace pipelab {

/// What a codec is told about the message it codes.
struct CodecCall {
  int boundary = 0;      ///< pipeline position of the boundary (between stages p and p+1)
  bool gradient = false;  ///< a gradient on its way back (else an activation)
  int mb = 0;            ///< the stage's own micro-batch number
  bool training = true;  ///< false in evaluation: state is not updated
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
  /// A fresh codec of the same type and options (one per stream end).
  virtual std::unique_ptr<Codec> copy() const = 0;
};

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
