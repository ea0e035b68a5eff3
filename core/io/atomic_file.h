#pragma once
/// Result files are written whole or not at all (temp file + rename), so an interrupted
/// run or sweep never leaves a half-written result (docs/contributing.md, habit 13).
#include <ostream>
#include <string>

namespace pipelab {

/// Writes `data` to `path` via a temporary file in the same folder and a rename. Any failed
/// step (a full disk) removes the temporary file and throws WriteError naming `path`.
void write_file_atomic(const std::string& path, const std::string& data);
/// Appends one line (plus '\n') to `path` and flushes it to the OS; WriteError on failure.
void append_line(const std::string& path, const std::string& line);
/// Throws WriteError naming `path` if `stream` failed (call after a write or a flush).
void check_written(const std::ostream& stream, const std::string& path);
/// Removes the temporary files (`<name>.tmp.<pid>`) that write_file_atomic left in `dir`
/// when a process was killed between writing and renaming.
void remove_stale_temporaries(const std::string& dir);

}  // namespace pipelab
