// `pipelab check scheme NAME`: the registry's conformance checks on one scheme.
#include <gtest/gtest.h>

#include "core/dist/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::check_test {
namespace {

TEST(Check, ABuiltInSchemePassesEveryCheck) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers (the two-process check needs them)";
  const auto [code, out] = testing::pipelab("check scheme gpipe --set scheme.chunks=2");
  EXPECT_EQ(code, 0) << out;
  for (const char* line : {"schedules valid at 1, 2 and 4 stages", "threaded == sequential (2 stages)",
                           "2 processes == one (2 stages)", "resumed after epoch 1 == uninterrupted",
                           "1 stage vs single (float64)"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 7) << out;
  EXPECT_NE(out.find("every check passed"), std::string::npos) << out;
}

TEST(Check, MistakesAreUsageErrors) {
  auto [code, out] = testing::pipelab("check scheme gpip");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("gpipe"), std::string::npos) << out;  // the closest name
  std::tie(code, out) = testing::pipelab("check model mlp");
  EXPECT_EQ(code, 2) << out;
  std::tie(code, out) = testing::pipelab("check scheme gpipe --set run.epochs=3");
  EXPECT_EQ(code, 2) << out;
}

}  // namespace
}  // namespace pipelab::check_test
