#pragma once
/// What travels between neighbouring stages: an activation or a gradient, plus an integer
/// tag a weight policy may attach (e.g. the weight version under vertical sync).
#include <ATen/Tensor.h>

namespace pipelab {

struct Message {
  at::Tensor value;
  int64_t tag = -1;
  /// Bytes on the wire (0 for an empty message).
  int64_t bytes() const { return value.defined() ? static_cast<int64_t>(value.nbytes()) : 0; }
};

}  // namespace pipelab
