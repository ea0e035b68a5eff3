#include "core/util/names.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace pipelab {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> closest_first(const std::string& name,
                                       std::vector<std::string> candidates) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const std::string& x, const std::string& y) {
                     const size_t dx = edit_distance(name, x);
                     const size_t dy = edit_distance(name, y);
                     return dx != dy ? dx < dy : x < y;
                   });
  return candidates;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string unknown_name_message(const std::string& kind, const std::string& name,
                                 const std::vector<std::string>& candidates) {
  return fmt::format("unknown {} '{}'; valid: {}", kind, name,
                     join(closest_first(name, candidates), ", "));
}

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace pipelab
