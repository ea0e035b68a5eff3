// `pipelab check scheme NAME`: the registry's conformance checks on one scheme.
#include <gtest/gtest.h>

#include "core/processes/process_group.h"
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
                           "1 stage vs single (float64)", "2 stages vs single (float64)", "4 stages vs single (float64)"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 9) << out;
  EXPECT_NE(out.find("every check passed"), std::string::npos) << out;
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// The line of the check report that names `check` ("" when none does).
std::string line_of(const std::string& out, const std::string& check) {
  const size_t at = out.find("  " + check + " ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// Two wrong schemes (tests/tools/wrong_schemes_plugin.cpp) pass every executor check; what
// they declare of their numbers fails them, naming where.
TEST(Check, ASynchronousLabelOnAnUpdatePerMicroBatchFails) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers (the two-process check needs them)";
  const auto [code, out] = testing::pipelab("check scheme steps_each_micro_batch --plugin " PIPELAB_WRONG_SCHEMES);
  EXPECT_EQ(code, 1) << out;
  EXPECT_HAS(line_of(out, "threaded == sequential (2 stages)"), "ok (bitwise)");
  EXPECT_HAS(line_of(out, "1 stage vs single (float64, 4 micro-batches)"), "FAILED");
  EXPECT_HAS(line_of(out, "2 stages vs single (float64, 4 micro-batches)"), "FAILED");
  EXPECT_HAS(line_of(out, "2 stages vs single (float64, 4 micro-batches)"),
             "first after step 1, in the weights of stages 0, 1");
  EXPECT_HAS(out, "some checks FAILED");
}

TEST(Check, AnAsynchronousSchemeStalerThanItsScheduleFails) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers (the two-process check needs them)";
  const auto [code, out] = testing::pipelab("check scheme older_buffer_async --plugin " PIPELAB_WRONG_SCHEMES);
  EXPECT_EQ(code, 1) << out;
  EXPECT_HAS(line_of(out, "threaded == sequential (2 stages)"), "ok (bitwise)");
  EXPECT_HAS(line_of(out, "2 stages: staleness within its schedule"),
             "FAILED (stage 0's gradients are 2 versions stale, and its schedule allows 1");
  EXPECT_HAS(out, "some checks FAILED");
}

// The built-in asynchronous schemes are as stale as their schedules say: 2BW's forwards read
// the version before the live one (Scheme::forward_lag).
TEST(Check, TwoBufferedPipeDreamIsAsStaleAsItDeclares) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers (the two-process check needs them)";
  const auto [code, out] = testing::pipelab("check scheme pipedream_2bw");
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(line_of(out, "4 stages: staleness within its schedule"), "ok");
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
