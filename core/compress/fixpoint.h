#pragma once
/// AQ-SGD's b-bit quantizer (docs/compression.md "Codecs"; DS3Lab/AC-SGD `_compress_nbits`),
/// shared by the `fixpoint` codec (direct, as AC-SGD compresses gradients) and `aq_sgd` (on
/// the change against the stored activation):
///   s = max |x| per scale group, kept as fp16;
///   q = clip(round_half_even(x / (s + 1e-6) * 2^(b-1)), -2^(b-1), 2^(b-1) - 1) + 2^(b-1);
///   x̂ = (q - 2^(b-1)) / 2^(b-1) * s.
/// The grid is asymmetric (+s decodes to (1 - 2^(1-b)) s, docs/schemes.md, "Quirks"): it defines the codes, so it
/// is kept. Codes travel packed, b bits each (⌈numel b / 8⌉ bytes), scales as fp16.
#include <ATen/Tensor.h>

#include <vector>

#include "core/config/fields.h"

namespace pipelab::compress {

/// Which elements share a scale.
enum class ScaleDims {
  Last,     ///< one per index of the last dimension, over all others (AC-SGD's dims (0, 1) of [mb, S, E])
  Channel,  ///< one per index of dimension 1 (a convolution's channels)
  Tensor,   ///< one for the whole tensor
};
inline const Choices<ScaleDims>& scale_dims_choices() {
  static const Choices<ScaleDims> c{{"last", ScaleDims::Last}, {"channel", ScaleDims::Channel}, {"tensor", ScaleDims::Tensor}};
  return c;
}

/// The quantizer's options (`bits`, `scale_dims`), read by both codecs.
struct FixpointOptions {
  int bits = 8;
  ScaleDims scale_dims = ScaleDims::Last;
  template <class V>
  void fields(V& v) {
    v("bits", bits, "bits per element (codes packed b to a byte boundary per tensor)", in_range(1, 8));
    v.choice("scale_dims", scale_dims, scale_dims_choices(),
             "which elements share a scale: last (one per index of the last dimension, AC-SGD's), channel "
             "(dimension 1), tensor");
  }
};

/// [packed codes (uint8), scales (fp16)] of `x`.
std::vector<at::Tensor> fixpoint_encode(const at::Tensor& x, const FixpointOptions& o);
/// x̂ of `shape` in `dtype` from fixpoint_encode's parts.
at::Tensor fixpoint_decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                           const FixpointOptions& o);

/// `codes` (each below 2^bits) packed bits-wise, lowest bits first; and back.
at::Tensor pack_bits(const at::Tensor& codes, int bits);
at::Tensor unpack_bits(const at::Tensor& packed, int64_t n, int bits);

}  // namespace pipelab::compress
