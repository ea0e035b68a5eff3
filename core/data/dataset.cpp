#include "core/data/dataset.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

TensorDataset::TensorDataset(at::Tensor x, at::Tensor y) : x_(std::move(x)), y_(std::move(y)) {
  PIPELAB_ASSERT(x_.size(0) == y_.size(0), "x has {} rows, y {}", x_.size(0), y_.size(0));
}

int64_t TensorDataset::size() const { return x_.size(0); }

Batch TensorDataset::get(const std::vector<int64_t>& indices, uint64_t /*seed*/) const {
  const at::Tensor idx = at::tensor(indices, at::kLong);
  return {x_.index_select(0, idx), y_.index_select(0, idx), at::Tensor()};
}

}  // namespace pipelab
