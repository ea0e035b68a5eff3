#pragma once
/// Helpers for messages: valid names listed closest first, user text made printable.
#include <string>
#include <vector>

namespace pipelab {

/// Edit distance between two strings (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b);

/// `candidates` sorted by edit distance to `name` (ties alphabetically).
std::vector<std::string> closest_first(const std::string& name,
                                       std::vector<std::string> candidates);

/// "unknown scheme 'gpip'; valid: gpipe, naive, single" (closest first).
std::string unknown_name_message(const std::string& kind, const std::string& name,
                                 const std::vector<std::string>& candidates);

/// `text` with control characters and bytes that are not printable written as \xNN, so a
/// message quoting a user's input is shown whole (a NUL would end it on a terminal).
std::string printable(const std::string& text);

/// Joins strings with a separator.
std::string join(const std::vector<std::string>& parts, const std::string& sep);

}  // namespace pipelab
