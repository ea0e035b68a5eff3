#include "core/util/memory_size.h"

#include <unistd.h>

#include <fmt/format.h>

namespace pipelab {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string memory_problem(double bytes) {
  const uint64_t have = physical_memory_bytes();
  if (have == 0 || bytes <= static_cast<double>(have)) return "";
  return fmt::format("needs {}, more than this machine's {}", format_bytes(bytes), format_bytes(static_cast<double>(have)));
}

}  // namespace pipelab
