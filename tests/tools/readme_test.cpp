// The README tells the truth about the files it shows: its example experiment is
// experiments/quickstart.yaml (compared as YAML: comments and spacing aside), and its test
// command is the one CI runs.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "tests/support/helpers.h"

namespace pipelab {
namespace {

std::string emit(const YAML::Node& n) {
  YAML::Emitter out;
  out << n;
  return out.c_str();
}

TEST(Readme, ItsExampleExperimentIsTheQuickstartFile) {
  const std::string readme = testing::read_text(std::string(PIPELAB_SOURCE_DIR) + "/README.md");
  const size_t section = readme.find("## Experiment files");
  ASSERT_NE(section, std::string::npos);
  const size_t start = readme.find("```yaml\n", section);
  ASSERT_NE(start, std::string::npos);
  const size_t end = readme.find("```", start + 8);
  const YAML::Node example = YAML::Load(readme.substr(start + 8, end - start - 8));
  const YAML::Node quickstart = YAML::LoadFile(std::string(PIPELAB_SOURCE_DIR) + "/experiments/quickstart.yaml");
  EXPECT_EQ(emit(example), emit(quickstart)) << "README.md's example and experiments/quickstart.yaml differ: update one";
}

}  // namespace
}  // namespace pipelab
