// Sequential == threaded, bit for bit, for every registered scheme (the registry decides
// the cases, so a new scheme is covered the day it is registered), with 2 and 4 stages.
#include <gtest/gtest.h>

#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::executor_equivalence_test {
namespace {

// Dropout and batch norm so that the random streams and the running statistics are part of
// what must match; 5 blocks, so 4 stages are possible. One intra-op thread everywhere:
// BLAS sums in a different order with another thread count, whichever executor runs.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4], dropout: 0.1, batch_norm: true}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3, threads: 1}
)";

class ExecutorEquivalence : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(ExecutorEquivalence, ThreadedEqualsSequentialBitwise) {
  const testing::SchemeCase& c = GetParam();
  const std::vector<std::string> common{"scheme=" + c.scheme, fmt::format("partition.stages={}", c.stages)};
  auto with = [&](const std::string& executor) {
    std::vector<std::string> o = common;
    o.push_back("run.executor=" + executor);
    return testing::train(kMlp, o);
  };
  const TensorDict sequential = with("sequential");
  const TensorDict threaded = with("{type: threaded, intra_op_threads: 1}");
  EXPECT_TRUE(testing::identical(sequential, threaded)) << "max difference " << testing::max_difference(sequential, threaded);
}

INSTANTIATE_TEST_SUITE_P(Registry, ExecutorEquivalence, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

}  // namespace
}  // namespace pipelab::executor_equivalence_test
