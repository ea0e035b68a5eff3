#include "tools/report/csv.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace pipelab::tools {

std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& name) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  int line = 1;
  const auto end_row = [&] {
    if (any || !field.empty() || !row.empty()) {
      row.push_back(field);
      rows.push_back(row);
    }
    row.clear();
    field.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        line += c == '\n';
        field += c;
      }
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n') {
      end_row();
      ++line;
    } else if (c != '\r') {
      field += c;
    }
  }
  if (quoted) {
    throw UserError(
        fmt::format("{}:{}: a quoted field never ends. Fix: close the quote (write \"\" for a quote "
                    "inside a field).",
                    name, line));
  }
  end_row();
  return rows;
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (i) out += ',';
    if (f.find_first_of(",\"\n\r") == std::string::npos) {
      out += f;
      continue;
    }
    out += '"';
    for (const char c : f) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    out += '"';
  }
  return out;
}

}  // namespace pipelab::tools
