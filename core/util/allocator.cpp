#include "core/util/allocator.h"

#include <malloc.h>

namespace pipelab {

void keep_freed_memory() {
#if defined(__GLIBC__)
  // 1 GiB: blocks below it come from the heap, and the heap is trimmed only above it.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace pipelab
