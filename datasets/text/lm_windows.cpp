#include "datasets/text/lm_windows.h"

#include <ATen/ATen.h>

namespace pipelab {

LanguageModelWindows language_model_windows(const std::vector<std::vector<int64_t>>& documents, int64_t length) {
  std::vector<int64_t> stream;
  for (const std::vector<int64_t>& d : documents) stream.insert(stream.end(), d.begin(), d.end());
  const int64_t n = stream.empty() ? 0 : (static_cast<int64_t>(stream.size()) - 1) / length;
  const at::Tensor all = at::tensor(stream, at::kLong);
  if (n == 0) return {at::empty({0, length}, at::kLong), at::empty({0, length}, at::kLong)};
  // Window i starts at i * length; x is its first `length` ids, y the same shifted by one.
  return {all.narrow(0, 0, n * length).view({n, length}).clone(), all.narrow(0, 1, n * length).view({n, length}).clone()};
}

}  // namespace pipelab
