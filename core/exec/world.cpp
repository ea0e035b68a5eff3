#include "core/exec/world.h"

#include "core/processes/value_rows.h"

namespace pipelab {

std::vector<std::vector<int64_t>> gather_values(World& world, const std::vector<int64_t>& values) {
  return row_values(world.gather_rows(value_rows(values)));
}

}  // namespace pipelab
