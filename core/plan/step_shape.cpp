#include "core/plan/step_shape.h"

#include <algorithm>

#include "core/util/error.h"

namespace pipelab {

std::vector<int64_t> chunk_sizes(int64_t n, int chunks) {
  PIPELAB_ASSERT(n > 0 && chunks > 0, "{} examples in {} chunks", n, chunks);
  const int64_t size = (n + chunks - 1) / chunks;
  std::vector<int64_t> out;
  for (int64_t start = 0; start < n; start += size) out.push_back(std::min(size, n - start));
  return out;
}

std::vector<std::vector<int64_t>> replica_chunk_sizes(int64_t n, int replicas, int chunks) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(replicas));
  const std::vector<int64_t> shares = chunk_sizes(n, replicas);
  for (size_t r = 0; r < shares.size(); ++r) out[r] = chunk_sizes(shares[r], chunks);
  return out;
}

}  // namespace pipelab
