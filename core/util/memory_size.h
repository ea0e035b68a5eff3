#pragma once
/// Sizes against this machine's memory: a user's size is checked before anything is
/// allocated for it, so an absurd value is a clear error rather than std::bad_alloc or the
/// kernel's out-of-memory killer.
#include <cstdint>
#include <string>

namespace pipelab {

/// Bytes of physical memory (sysconf); 0 when unknown.
uint64_t physical_memory_bytes();

/// "1.5 GiB", "320.0 MiB", "12.0 KiB".
std::string format_bytes(double bytes);

/// "" when `bytes` fit in this machine's physical memory (or it is unknown); else the
/// problem, e.g. "needs 3.6 TiB, more than this machine's 23.4 GiB".
std::string memory_problem(double bytes);

}  // namespace pipelab
