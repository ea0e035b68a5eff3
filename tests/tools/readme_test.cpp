// The README and the guides it links tell the truth about what they show: the experiment
// files guide's example is experiments/quickstart.yaml (compared as YAML: comments and
// spacing aside), the command-line guide's table lists every option `--help` shows, the
// scheme catalogue names every registered scheme, and the README stays a front door.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "core/scheme/scheme.h"
#include "tests/support/helpers.h"

namespace pipelab::readme_test {
namespace {

std::string emit(const YAML::Node& n) {
  YAML::Emitter out;
  out << n;
  return out.c_str();
}

TEST(Readme, ItsExampleExperimentIsTheQuickstartFile) {
  const std::string readme = testing::read_text(std::string(PIPELAB_SOURCE_DIR) + "/docs/experiment-files.md");
  const size_t section = readme.find("# Experiment files");
  ASSERT_NE(section, std::string::npos);
  const size_t start = readme.find("```yaml\n", section);
  ASSERT_NE(start, std::string::npos);
  const size_t end = readme.find("```", start + 8);
  const YAML::Node example = YAML::Load(readme.substr(start + 8, end - start - 8));
  const YAML::Node quickstart = YAML::LoadFile(std::string(PIPELAB_SOURCE_DIR) + "/experiments/quickstart.yaml");
  EXPECT_EQ(emit(example), emit(quickstart))
      << "docs/experiment-files.md's example and experiments/quickstart.yaml differ: update one";
}

/// The long options in `text` ("--stop-after", ...).
std::set<std::string> long_options(const std::string& text) {
  std::set<std::string> out;
  const std::regex option("--([a-z][a-z0-9-]*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), option); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

TEST(Readme, TheCommandTableListsWhatHelpShows) {
  const std::string readme = testing::read_text(std::string(PIPELAB_SOURCE_DIR) + "/docs/command-line.md");
  const size_t section = readme.find("# Command line");
  ASSERT_NE(section, std::string::npos);
  const std::string table = readme.substr(section, readme.find("\n\n", readme.find("| command |", section)) - section);
  // Options a command takes as positional arguments, written as placeholders in the table.
  const std::map<std::string, std::set<std::string>> positional{
      {"list", {"kind", "name"}}, {"check", {"what", "name"}}, {"table", {"runs"}}, {"plot", {"runs"}}, {"eval", {"run"}}};
  for (const char* command : {"run", "launch", "check", "eval", "list", "describe", "schedule", "simulate", "plan",
                              "sweep", "table", "plot"}) {
    // The table's columns for this command: every row whose syntax starts with it.
    std::string syntax;
    const std::regex row(std::string("\\| `pipelab ") + command + "\\b([^`]*)`");
    for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it) {
      syntax += (*it)[1].str() + " ";
    }
    ASSERT_FALSE(syntax.empty()) << "docs/command-line.md's table has no row for pipelab " << command;
    const auto [rc, help] = testing::shell(std::string(PIPELAB_BINARY) + " " + command + " --help 2>&1");
    ASSERT_EQ(rc, 0) << help;
    const std::set<std::string> documented = long_options(syntax);
    const std::string options = help.substr(help.find("options:"));
    for (const std::string& o : long_options(options)) {
      if (o == "help" || o == "file" || (positional.count(command) && positional.at(command).count(o))) continue;
      EXPECT_TRUE(documented.count(o)) << "pipelab " << command << " --" << o << " is not in docs/command-line.md's table";
    }
    for (const std::string& o : documented) {
      EXPECT_TRUE(long_options(options).count(o)) << "docs/command-line.md's pipelab " << command << " --" << o
                                                  << " is not an option of the command";
    }
  }
}

TEST(Readme, HelpVersionAndHelpForACommand) {
  const auto [rc, version] = testing::shell(std::string(PIPELAB_BINARY) + " --version 2>&1");
  EXPECT_EQ(rc, 0);
  EXPECT_NE(version.find("LibTorch 2."), std::string::npos) << version;
  EXPECT_NE(version.find("(git "), std::string::npos) << version;
  const auto [rc2, help] = testing::shell(std::string(PIPELAB_BINARY) + " help run 2>&1");
  EXPECT_EQ(rc2, 0);
  EXPECT_EQ(help, testing::shell(std::string(PIPELAB_BINARY) + " run --help 2>&1").second);
}

TEST(Readme, TheSchemeTableNamesEveryRegisteredScheme) {
  const std::string readme = testing::read_text(std::string(PIPELAB_SOURCE_DIR) + "/docs/scheme-catalog.md");
  const size_t section = readme.find("# Schemes");
  ASSERT_NE(section, std::string::npos);
  const std::string table = readme.substr(section, readme.find("\n\n", readme.find("\n|", section)) - section);
  for (const std::string& name : Registry<Scheme>::get().names()) {
    if (name.rfind("test_", 0) == 0) continue;  // registered by the tests
    EXPECT_NE(table.find("`" + name + "`"), std::string::npos) << "scheme " << name << " has no row in docs/scheme-catalog.md";
  }
}

TEST(Readme, IsAFrontDoorOfAtMost250Lines) {
  const std::string readme = testing::read_text(std::string(PIPELAB_SOURCE_DIR) + "/README.md");
  EXPECT_LE(std::count(readme.begin(), readme.end(), '\n'), 250)
      << "README.md is the front door: move reference material into docs/ and link it";
}

}  // namespace
}  // namespace pipelab::readme_test
