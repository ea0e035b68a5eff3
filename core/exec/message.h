#pragma once
/// What travels between neighbouring stages: an activation or a gradient (and, for n-wise
/// interlocking, further gradients in `extra`), plus an integer tag a weight policy may
/// attach (e.g. the weight version under vertical sync).
#include <ATen/Tensor.h>

#include <vector>

namespace pipelab {

struct Message {
  at::Tensor value;
  std::vector<at::Tensor> extra;
  int64_t tag = -1;
  /// Bytes on the wire (0 for an empty message).
  int64_t bytes() const {
    int64_t n = value.defined() ? static_cast<int64_t>(value.nbytes()) : 0;
    for (const at::Tensor& t : extra) n += static_cast<int64_t>(t.nbytes());
    return n;
  }
  bool empty() const { return !value.defined() && extra.empty(); }
};

}  // namespace pipelab
