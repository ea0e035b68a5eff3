#pragma once
/// Result files are written whole or not at all (temp file + rename), so an interrupted
/// run or sweep never leaves a half-written result (DEVELOPERS.md, "nothing is lost").
#include <string>

namespace pipelab {

/// Writes `data` to `path` via a temporary file in the same folder and a rename.
void write_file_atomic(const std::string& path, const std::string& data);
/// Appends one line (plus '\n') to `path` and flushes it to the OS.
void append_line(const std::string& path, const std::string& line);
/// Reads a whole file; a missing file is a UserError naming it.
std::string read_file(const std::string& path);

}  // namespace pipelab
