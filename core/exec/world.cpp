#include "core/exec/world.h"

#include <ATen/ATen.h>

namespace pipelab {

std::vector<std::vector<int64_t>> gather_values(World& world, const std::vector<int64_t>& values) {
  // One value per row, so that processes may bring different counts.
  const at::Tensor rows = at::tensor(values, at::kLong).view({static_cast<int64_t>(values.size()), 1});
  std::vector<std::vector<int64_t>> out;
  for (const at::Tensor& t : world.gather_rows(rows)) {
    const at::Tensor c = t.contiguous();
    out.emplace_back(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  }
  return out;
}

}  // namespace pipelab
