// docs/reference/ is what `pipelab list --markdown` writes from the registry: regenerated
// here and compared file by file, so a scheme, an option, a default or a command's --help
// that changes without its reference fails here, with the command that brings it up to date.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::reference_test {
namespace {

namespace fs = std::filesystem;

const fs::path kReference = fs::path(PIPELAB_EXPERIMENTS_DIR).parent_path() / "docs" / "reference";

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

/// The first line (1-based) where `a` and `b` differ, with both versions of it.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  for (int n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(ia, la)), more_b = static_cast<bool>(std::getline(ib, lb));
    if (!more_a && !more_b) return "(none)";
    if (!more_a || !more_b || la != lb) return std::to_string(n) + ":\n  kept: " + la + "\n  made: " + lb;
  }
}

TEST(Reference, DocsReferenceIsWhatTheRegistryGenerates) {
  testing::TempDir dir;
  const auto [code, out] = testing::pipelab("list --markdown " + dir.file("ref"));
  ASSERT_EQ(code, 0) << out;
  const std::string fix = "bring it up to date: build/pipelab list --markdown docs/reference";
  const std::set<std::string> generated = files_in(dir.file("ref"));
  EXPECT_EQ(files_in(kReference), generated) << fix;
  for (const std::string& f : generated) {
    ASSERT_TRUE(fs::exists(kReference / f)) << f << " is missing; " << fix;
    const std::string kept = testing::read_text((kReference / f).string());
    const std::string made = testing::read_text(dir.file("ref/" + f));
    EXPECT_TRUE(kept == made) << "docs/reference/" << f << " differs from the registry at line "
                              << first_difference(kept, made) << "; " << fix;
  }
}

TEST(Reference, EverySchemeAndEveryCommandHasItsSection) {
  testing::TempDir dir;
  ASSERT_EQ(testing::pipelab("list --markdown " + dir.file("ref")).first, 0);
  const std::string schemes = testing::read_text(dir.file("ref/schemes.md"));
  for (const char* s : {"## `gpipe`", "## `pipedream`", "## `zbv`", "## `dualpipe_v`", "| `chunks` | an integer | `1` |"}) {
    EXPECT_NE(schemes.find(s), std::string::npos) << s;
  }
  const std::string commands = testing::read_text(dir.file("ref/commands.md"));
  for (const char* c : {"## `pipelab run`", "## `pipelab plan`", "--devices", "## `pipelab list`", "--markdown"}) {
    EXPECT_NE(commands.find(c), std::string::npos) << c;
  }
}

}  // namespace
}  // namespace pipelab::reference_test
