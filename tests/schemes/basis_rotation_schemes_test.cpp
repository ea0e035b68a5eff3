// Basis rotation under pipelab's asynchronous schemes (docs/schemes.md F71-F73): the authors
// train it on PipeDream's 1F1B with weight stashing; it composes with 2BW, PipeMare,
// SpecTrain's prediction and the asynchronous Nesterov look-ahead, and each trains to the same
// bits in the sequential and the threaded executor, and launched as one process per stage,
// stopped and resumed there too. On one stage a pipeline is the sequential optimizer.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::basis_rotation_schemes_test {
namespace {

constexpr const char* kRotation =
    "optimizer={type: basis_rotation, lr: 0.01, betas: [0.9, 0.999], precondition_frequency: 2, rotate: [\"*\"]}";

TensorDict trained(const std::string& scheme, const std::string& executor, int stages = 2) {
  return testing::train(testing::kEverySchemeMlp, {"scheme=" + scheme, fmt::format("partition.stages={}", stages),
                                                   "run.executor=" + executor, kRotation});
}

TEST(BasisRotationSchemes, EveryAsynchronousSchemeTrainsToTheSameBitsInEitherExecutor) {
  for (const std::string& scheme :
       {"{type: pipedream}", "{type: pipedream_2bw}", "{type: pipemare, rescheduling_steps: 10}", "{type: spectrain}",
        "{type: nesterov_async}", "{type: async}"}) {
    const TensorDict sequential = trained(scheme, "sequential");
    const TensorDict threaded = trained(scheme, "threaded");
    ASSERT_FALSE(sequential.empty()) << scheme;
    EXPECT_TRUE(testing::identical(sequential, threaded)) << scheme;
  }
}

TEST(BasisRotationSchemes, OnOneStageAPipelineIsTheSequentialOptimizer) {
  EXPECT_TRUE(testing::identical(trained("{type: pipedream}", "sequential", 1),
                                    trained("{type: single}", "sequential", 1)));
}

TEST(BasisRotationSchemes, LaunchedAsProcessesAndResumedThereEqualsOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  for (const std::string& scheme :
       {"{type: pipedream}", "{type: pipedream_2bw}", "{type: spectrain}", "{type: nesterov_async}"}) {
    testing::TempDir dir;
    testing::write_text(dir.file("e.yaml"), testing::kEverySchemeMlp);
    // Two epochs, so that the launched run can stop after the first and resume.
    const std::string sets = fmt::format("--set 'scheme={}' --set '{}' --set run.epochs=2", scheme, kRotation);
    const auto [c1, out1] =
        testing::pipelab(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets, dir.file("one")));
    ASSERT_EQ(c1, 0) << out1;
    const std::string launch =
        fmt::format("launch --nproc 2 {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets, dir.file("two"));
    const auto [c2, out2] = testing::pipelab(launch + " --stop-after 1");
    ASSERT_EQ(c2, 0) << out2;
    const auto [c3, out3] = testing::pipelab(launch + " --resume");
    ASSERT_EQ(c3, 0) << out3;
    SCOPED_TRACE(scheme);
    testing::expect_same_run(dir.file("one"), dir.file("two"));
  }
}

}  // namespace
}  // namespace pipelab::basis_rotation_schemes_test
