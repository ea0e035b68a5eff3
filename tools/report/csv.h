#pragma once
/// Minimal RFC 4180 CSV: reading metrics/epochs.csv and reference tables, writing tables.
#include <string>
#include <vector>

namespace pipelab::tools {

/// Rows of fields; quoted fields may hold commas, quotes ("") and line breaks. Blank lines
/// are skipped. Throws UserError naming `name` on an unterminated quote.
std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& name);

/// One CSV line (no line break), quoting fields that need it.
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace pipelab::tools
