// The documentation that shows code is held to the code: docs/adding-a-scheme.md's listings
// are schemes/pipedream_flush.cpp and schemes/zb_h2.cpp byte for byte (so they compile), and every hook its table
// names exists in core/scheme/scheme.h; no document cites a file that is not in the tree. The numbered formulas,
// quirks and oracles the tree cites (F12, Q27, O14) are all defined in docs/, and none reaches a user's message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/helpers.h"

namespace pipelab::docs_test {
namespace {

const std::string kRoot = PIPELAB_SOURCE_DIR;

TEST(Docs, AddingASchemeListsTheRealFile) {
  const std::string doc = testing::read_text(kRoot + "/docs/adding-a-scheme.md");
  const size_t start = doc.find("```cpp\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = doc.find("```", start + 7);
  EXPECT_EQ(doc.substr(start + 7, end - start - 7), testing::read_text(kRoot + "/schemes/pipedream_flush.cpp"))
      << "update docs/adding-a-scheme.md's listing to schemes/pipedream_flush.cpp";
  // The second listing: a schedule-only scheme.
  const size_t start2 = doc.find("```cpp\n", end + 3);
  ASSERT_NE(start2, std::string::npos);
  const size_t end2 = doc.find("```", start2 + 7);
  EXPECT_EQ(doc.substr(start2 + 7, end2 - start2 - 7), testing::read_text(kRoot + "/schemes/zb_h2.cpp"))
      << "update docs/adding-a-scheme.md's second listing to schemes/zb_h2.cpp";
  // Every hook the tables name is a scheme's or one of its parts'.
  const std::string scheme_h =
      testing::read_text(kRoot + "/core/scheme/scheme.h") + testing::read_text(kRoot + "/core/scheme/scheme_parts.h");
  const std::regex hook("\\| `([a-z_]+)\\(");
  int hooks = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), hook), e; it != e; ++it, ++hooks) {
    EXPECT_NE(scheme_h.find(" " + (*it)[1].str() + "("), std::string::npos) << (*it)[1] << " is not in core/scheme/scheme.h or scheme_parts.h";
  }
  EXPECT_GE(hooks, 8);
}

TEST(Docs, EveryCitedDocumentIsInTheTree) {
  // "docs/<name>.md" anywhere in the sources and documents must exist.
  const std::regex cited("docs/([a-z0-9_-]+\\.md)");
  for (const char* dir : {"core", "schemes", "models", "datasets", "tools", "docs", "experiments"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kRoot + "/" + dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".md" && ext != ".yaml" && ext != ".py" && ext != ".sh") continue;
      const std::string text = testing::read_text(entry.path().string());
      for (std::sregex_iterator it(text.begin(), text.end(), cited), e; it != e; ++it) {
        EXPECT_TRUE(std::filesystem::exists(kRoot + "/docs/" + (*it)[1].str())) << entry.path() << " cites " << (*it)[0];
      }
    }
  }
  const std::string readme = testing::read_text(kRoot + "/README.md");
  EXPECT_EQ(readme.find("reference-schemes.md"), std::string::npos);
  EXPECT_EQ(readme.find("../shared/docs"), std::string::npos);
}

// Labels. Code and documents cite docs/'s numbered formulas (F12), quirks of the reference code (Q27) and test
// oracles (O14): each must be defined there, or a reader meets a number nothing explains, and none may appear in a
// message, where a user cannot look it up.

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// The length of the label that starts at `at` (F, Q or O and one to three digits, ending a word: "F12", not "F14p"),
/// or 0. The caller checks that no word character precedes it.
size_t label_length(const std::string& s, size_t at) {
  if (at >= s.size() || (s[at] != 'F' && s[at] != 'Q' && s[at] != 'O')) return 0;
  size_t end = at + 1;
  while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end])) != 0) ++end;
  const size_t digits = end - at - 1;
  return digits >= 1 && digits <= 3 && (end == s.size() || !word_char(s[end])) ? end - at : 0;
}

/// Tokens of a label's shape that name something else: F0, a schedule's forward of micro-batch 0 (formulas start at
/// F1); F64, a safetensors dtype; F401 and F403, flake8 codes in `# noqa` comments. Other schedule actions (F1 to
/// F3, say) share their names with defined formulas and pass; compiler flags (-O2) are told apart by their dash.
const std::set<std::string> kNotLabels{"F0", "F64", "F401", "F403"};

struct Cite {
  std::string label;
  size_t line;  // 1-based, in the text scanned
};

/// The labels `text` cites. A label is a word of its own ("BF16" and "0F1" hold none); one right after a lone dash
/// is a compiler flag ("-O2"), while in "F21-F23" both ends count.
std::vector<Cite> labels_in(const std::string& text) {
  std::vector<Cite> out;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
    if (i > 0 && word_char(text[i - 1])) continue;
    const size_t n = label_length(text, i);
    if (n == 0) continue;
    const bool flag = i > 0 && text[i - 1] == '-' && (i == 1 || !word_char(text[i - 2]));
    const std::string label = text.substr(i, n);
    if (!flag && kNotLabels.count(label) == 0) out.push_back({label, line});
    i += n - 1;
  }
  return out;
}

/// The labels a quirk-table row defines: "| Q43 | ..." one, "| Q33–Q35 | ..." (en dash or hyphen) each of the range.
std::vector<std::string> table_row_labels(const std::string& line) {
  const size_t n = line.rfind("| ", 0) == 0 ? label_length(line, 2) : 0;
  if (n == 0) return {};
  const char kind = line[2];
  const int first = std::stoi(line.substr(3, n - 1));
  int last = first;
  size_t after = 2 + n;
  static const std::string kDashes[] = {"\u2013", "-"};  // an en dash, as the tables write ranges, or a hyphen
  for (const std::string& dash : kDashes) {
    if (line.compare(after, dash.size(), dash) != 0) continue;
    const size_t m = label_length(line, after + dash.size());
    if (m == 0 || line[after + dash.size()] != kind) return {};
    last = std::stoi(line.substr(after + dash.size() + 1, m - 1));
    after += dash.size() + m;
    break;
  }
  if (line.compare(after, 2, " |") != 0) return {};
  std::vector<std::string> out;
  for (int k = first; k <= last; ++k) out.push_back(kind + std::to_string(k));
  return out;
}

/// The labels docs/*.md define: a bold entry ("**F57 — Gradient clipping", "**O1 — oracle**", "**Q48**") or a row
/// of a quirk table.
std::set<std::string> defined_labels() {
  std::set<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(kRoot + "/docs")) {
    if (entry.path().extension().string() != ".md") continue;
    const std::string text = testing::read_text(entry.path().string());
    for (size_t at = text.find("**"); at != std::string::npos; at = text.find("**", at + 2)) {
      if (const size_t n = label_length(text, at + 2)) out.insert(text.substr(at + 2, n));
    }
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      for (const std::string& label : table_row_labels(line)) out.insert(label);
    }
  }
  return out;
}

/// The files under `dirs` (recursively) with one of `extensions`.
std::vector<std::filesystem::path> files_under(const std::vector<std::string>& dirs,
                                               const std::set<std::string>& extensions) {
  std::vector<std::filesystem::path> out;
  for (const std::string& dir : dirs) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kRoot + "/" + dir)) {
      if (entry.is_regular_file() && extensions.count(entry.path().extension().string()) > 0) {
        out.push_back(entry.path());
      }
    }
  }
  return out;
}

std::string in_repository(const std::filesystem::path& file) { return file.lexically_relative(kRoot).string(); }

TEST(Docs, EveryCitedLabelIsDefined) {
  const std::set<std::string> defined = defined_labels();
  ASSERT_GE(defined.size(), 100u) << "docs/ defines few labels: did the form of a definition change?";
  std::vector<std::filesystem::path> files =
      files_under({"core", "schemes", "models", "datasets", "tools", "tests", "docs"}, {".cpp", ".h", ".py", ".md"});
  files.emplace_back(kRoot + "/README.md");
  std::map<std::string, std::set<std::string>> undefined;  // label -> the files citing it
  for (const auto& file : files) {
    for (const Cite& cite : labels_in(testing::read_text(file.string()))) {
      if (defined.count(cite.label) == 0) undefined[cite.label].insert(in_repository(file));
    }
  }
  std::string report;
  for (const auto& [label, citing] : undefined) {
    report += label + " (cited in";
    for (const std::string& file : citing) report += " " + file;
    report += ")\n";
  }
  EXPECT_TRUE(undefined.empty()) << "labels that docs/ does not define (give each a bold entry, \"**<label> — ...\", "
                                    "or a row of docs/schemes.md's quirk table):\n"
                                 << report;
}

/// Each string literal of C++ source `code`, with the line it starts on: "..." and raw R"d(...)d" strings, outside
/// comments; char literals and digit separators (1'000) are skipped.
std::vector<std::pair<size_t, std::string>> string_literals(const std::string& code) {
  std::vector<std::pair<size_t, std::string>> out;
  size_t line = 1;
  const auto move_to = [&](size_t from, size_t to) {  // `to`, having counted the lines in between
    to = std::min(to, code.size());
    line += static_cast<size_t>(std::count(code.begin() + from, code.begin() + to, '\n'));
    return to;
  };
  for (size_t i = 0; i < code.size();) {
    const char c = code[i];
    if (code.compare(i, 2, "//") == 0) {
      i = move_to(i, code.find('\n', i));
    } else if (code.compare(i, 2, "/*") == 0) {
      const size_t end = code.find("*/", i + 2);
      i = move_to(i, end == std::string::npos ? end : end + 2);
    } else if (c == '"' && i > 0 && code[i - 1] == 'R' && (i == 1 || !word_char(code[i - 2]))) {
      const size_t open = code.find('(', i);
      const std::string close = ")" + code.substr(i + 1, open - i - 1) + "\"";
      const size_t end = code.find(close, open);
      if (open == std::string::npos || end == std::string::npos) break;
      out.emplace_back(line, code.substr(open + 1, end - open - 1));
      i = move_to(i, end + close.size());
    } else if (c == '"' || (c == '\'' && !(i > 0 && word_char(code[i - 1])))) {
      size_t end = i + 1;
      while (end < code.size() && code[end] != c) end += code[end] == '\\' ? 2 : 1;
      if (c == '"') out.emplace_back(line, code.substr(i + 1, std::min(end, code.size()) - i - 1));
      i = move_to(i, end + 1);
    } else {
      if (c == '\n') ++line;
      ++i;
    }
  }
  return out;
}

TEST(Docs, NoLabelReachesUsers) {
  std::string report;
  for (const auto& file : files_under({"core", "schemes", "models", "datasets", "tools"}, {".cpp", ".h"})) {
    for (const auto& [line, literal] : string_literals(testing::read_text(file.string()))) {
      for (const Cite& cite : labels_in(literal)) {
        if (cite.label == literal) continue;  // a name standing alone, such as safetensors' dtype "F32"
        report += in_repository(file) + ":" + std::to_string(line + cite.line - 1) + ": " + cite.label + "\n";
      }
    }
  }
  EXPECT_TRUE(report.empty()) << "string literals cite labels a user cannot look up; name the behaviour instead "
                                 "(\"torch's rule\", \"FTPipe's code\"):\n"
                              << report;
}

}  // namespace
}  // namespace pipelab::docs_test
