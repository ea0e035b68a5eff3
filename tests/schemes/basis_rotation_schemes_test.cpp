// Basis rotation under pipelab's asynchronous schemes (docs/schemes.md F71-F73): the authors
// train it on PipeDream's 1F1B with weight stashing; it composes with 2BW, PipeMare,
// SpecTrain's prediction and the asynchronous Nesterov look-ahead, and each trains to the same
// bits in the sequential and the threaded executor. On one stage a pipeline is the sequential
// optimizer.
#include <fmt/format.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pipelab::basis_rotation_schemes_test
