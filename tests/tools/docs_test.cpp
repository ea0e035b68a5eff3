// The documentation that shows code is held to the code: docs/adding-a-scheme.md's listings
// are schemes/pipedream_flush.cpp and schemes/zb_h2.cpp byte for byte (so they compile), and every hook its table
// names exists in core/scheme/scheme.h; no document cites a file that is not in the tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

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
  const std::string scheme_h = testing::read_text(kRoot + "/core/scheme/scheme.h");
  const std::regex hook("\\| `([a-z_]+)\\(");
  int hooks = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), hook), e; it != e; ++it, ++hooks) {
    EXPECT_NE(scheme_h.find(" " + (*it)[1].str() + "("), std::string::npos) << (*it)[1] << " is not in core/scheme/scheme.h";
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

}  // namespace
}  // namespace pipelab::docs_test
