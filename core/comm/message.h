#pragma once
/// What travels between neighbouring stages: the tensors crossing the boundary (the live set
/// of core/model/block_io.h, in its order: one tensor for a chain of one-tensor blocks) or
/// their gradients, further gradients for n-wise interlocking in `extra`, and an integer tag
/// a weight policy may attach (e.g. the weight version under vertical sync).
#include <ATen/Tensor.h>

#include <vector>

#include "core/model/block_io.h"

namespace pipelab {

struct Message {
  /// Activations or gradients, in the boundary's order. A gradient entry is undefined where
  /// its tensor has none (an integer tensor such as a padding mask).
  std::vector<at::Tensor> values;
  std::vector<at::Tensor> extra;
  int64_t tag = -1;
  /// The first value (undefined when there is none): for one-tensor boundaries.
  at::Tensor value() const { return values.empty() ? at::Tensor() : values.front(); }
  /// Bytes on the wire (0 for an empty message).
  int64_t bytes() const { return total_bytes(values) + total_bytes(extra); }
  bool empty() const {
    for (const at::Tensor& t : values) {
      if (t.defined()) return false;
    }
    return extra.empty();
  }
};

}  // namespace pipelab
