#pragma once
/// Reading the files a user names (experiments, schedules, cost files, a run's metrics,
/// datasets, checkpoints). Each is opened without blocking and checked to be a regular file
/// before a byte is read: a FIFO, a device or a socket given as an input would otherwise
/// block pipelab forever or feed it an endless stream (docs/contributing.md, hostile inputs).
#include <cstdint>
#include <string>

namespace pipelab {

/// The most bytes read_file reads (a larger file is a UserError naming its size).
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{1} << 32;

/// Reads a whole regular file. A missing file, a folder, a loop of symbolic links, a FIFO or
/// device, an unreadable or a too large file is a UserError naming the path and the fix.
std::string read_file(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

/// The same checks without reading, for files another library opens by name (LibTorch's
/// zip reader): a UserError unless `path` is a regular file this process can open.
void check_input_file(const std::string& path);

/// True when `path` exists as anything (a dangling symbolic link counts); never throws.
bool input_exists(const std::string& path);

}  // namespace pipelab
