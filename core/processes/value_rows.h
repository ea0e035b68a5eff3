#pragma once
/// Lists of int64 values of different lengths through a gather of rows (World::gather_rows,
/// ProcessGroup::all_gather_rows): one value per row, so that processes may bring different
/// counts, and back.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace pipelab {

/// `values` as a [values, 1] int64 tensor.
inline at::Tensor value_rows(const std::vector<int64_t>& values) {
  return at::tensor(values, at::kLong).view({static_cast<int64_t>(values.size()), 1});
}

/// Each gathered [n, 1] tensor's values.
inline std::vector<std::vector<int64_t>> row_values(const std::vector<at::Tensor>& gathered) {
  std::vector<std::vector<int64_t>> out;
  for (const at::Tensor& t : gathered) {
    const at::Tensor c = t.contiguous();
    out.emplace_back(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  }
  return out;
}

}  // namespace pipelab
