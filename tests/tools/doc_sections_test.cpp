// Code cites docs/'s sections by name, `docs/schemes.md, "pipedream_2bw"`, never by number (a section sign
// and digits), which points elsewhere once a document is renumbered. Each name cited is a heading or a bold
// entry's title in its document, so a renamed section fails here instead of leaving a dangling
// reference. Papers' sections are cited by number ("Qi et al. 2024, section 3.1"): those never move.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/helpers.h"

namespace pipelab::doc_sections_test {
namespace {

const std::string kRoot = PIPELAB_SOURCE_DIR;

/// The source, build and experiment files of the tree (docs/ and build outputs aside).
std::vector<std::filesystem::path> code_files() {
  const std::set<std::string> kinds{".cpp", ".h", ".cu", ".py", ".yaml", ".sh", ".txt", ".cmake"};
  std::vector<std::filesystem::path> out;
  for (const char* dir : {"core", "schemes", "models", "datasets", "tools", "tests", "experiments"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kRoot + "/" + dir)) {
      if (entry.is_regular_file() && kinds.count(entry.path().extension().string())) out.push_back(entry.path());
    }
  }
  return out;
}

std::string in_tree(const std::filesystem::path& p) { return std::filesystem::relative(p, kRoot).string(); }

/// What a citation may name in `doc`: its headings, without the '#'s, a leading section number and
/// backticks, and its bold entries' titles ("**F59 — Muon**").
std::vector<std::string> titles(const std::string& doc) {
  std::vector<std::string> out;
  std::istringstream in(testing::read_text(kRoot + "/docs/" + doc));
  const std::regex heading(R"(^#+\s*(?:[0-9][0-9.]*\s+)?(.*)$)"), bold(R"(\*\*([^*]+)\*\*)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, heading)) out.push_back(m[1]);
    for (std::sregex_iterator it(line.begin(), line.end(), bold), e; it != e; ++it) out.push_back((*it)[1]);
  }
  for (std::string& t : out) t.erase(std::remove(t.begin(), t.end(), '`'), t.end());
  return out;
}

TEST(DocSections, CodeCitesSectionsByName) {
  std::string report;
  for (const auto& file : code_files()) {
    std::istringstream in(testing::read_text(file.string()));
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      const size_t at = line.find("§");
      if (at != std::string::npos && at + 2 < line.size() && std::isdigit(static_cast<unsigned char>(line[at + 2]))) {
        report += in_tree(file) + ":" + std::to_string(n) + ": " + line + "\n";
      }
    }
  }
  EXPECT_TRUE(report.empty()) << "sections cited by number; cite a document's section by its name, "
                                 "docs/schemes.md, \"Numbered oracles\" (a paper's: \"section 3.1\"):\n"
                              << report;
}

TEST(DocSections, EveryCitedSectionIsInItsDocument) {
  // docs/x.md, "Name" or docs/x.md "Name", its quotes escaped inside a C++ string literal.
  const std::regex cite(R"re(docs/([a-z0-9_-]+\.md),? \\?"([^"\\]+)\\?")re");
  const std::regex wrapped(R"(\s*\n\s*(?:///?|#)?\s*)");
  std::map<std::string, std::vector<std::string>> docs;
  std::string report;
  int cited = 0;
  for (const auto& file : code_files()) {
    const std::string text = testing::read_text(file.string());
    for (std::sregex_iterator it(text.begin(), text.end(), cite), e; it != e; ++it, ++cited) {
      const std::string doc = (*it)[1];
      // A name a comment wraps is read as one line; a quote that closes a string literal is none.
      std::string name = std::regex_replace((*it)[2].str(), wrapped, " ");
      if (name.find_first_not_of(' ') == std::string::npos) continue;
      name = name.substr(name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (!std::filesystem::exists(kRoot + "/docs/" + doc)) continue;  // Docs.EveryCitedDocumentIsInTheTree says so
      if (!docs.count(doc)) docs[doc] = titles(doc);
      bool found = false;
      for (const std::string& t : docs[doc]) found = found || t.find(name) != std::string::npos;
      if (!found) report += in_tree(file) + ": docs/" + doc + ", \"" + name + "\"\n";
    }
  }
  EXPECT_GE(cited, 200) << "few sections cited by name: did the form of a citation change?";
  EXPECT_TRUE(report.empty()) << "sections no heading or bold entry of their document names (rename the citation, "
                                 "or the section back):\n"
                              << report;
}

}  // namespace
}  // namespace pipelab::doc_sections_test
