#include "core/exec/executor.h"

#include <ATen/Parallel.h>

#include <fmt/format.h>

namespace pipelab {

std::string Executor::thread_layout(int /*stages*/) const {
  const int n = at::get_num_threads();
  return fmt::format("1 thread x {} intra-op thread{}", n, n == 1 ? "" : "s");
}

}  // namespace pipelab
