// Compressed boundaries under every registered scheme (docs/compression.md): the codecs sit at
// the SEND and RECV actions every executor runs, so with compression on the sequential and
// threaded executors still agree bit for bit, and the run is not the uncompressed one (the
// decoded values are what trains). A stateful codec (top-k with error feedback on the way
// forward, a cast on the way back) covers the per-stream state under every schedule order.
#include <gtest/gtest.h>

#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::compression_schemes_test {
namespace {

class CompressEveryScheme : public ::testing::TestWithParam<testing::SchemeCase> {};

const char* kSmall = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 3, threads: 1}
)";

TEST_P(CompressEveryScheme, ExecutorsAgreeAndTheCodecsAct) {
  const testing::SchemeCase& c = GetParam();
  if (c.stages != 2) GTEST_SKIP() << "2 stages only";
  if (c.scheme.find("type: single") != std::string::npos || c.scheme.find("type: dp") != std::string::npos) {
    GTEST_SKIP() << "no stage boundary";
  }
  std::string codecs =
      "compression={activations: {type: topk, fraction: 0.5, error_feedback: ef}, gradients: {type: cast}}";
  // Schemes whose stages send no gradient back (local losses) refuse a gradient codec, which
  // would code nothing; they compress their activations only.
  const bool local = c.scheme.find("type: dgl") != std::string::npos || c.scheme.find("mode: local") != std::string::npos;
  const std::string refused = testing::user_error([&] {
    testing::train(kSmall, {"scheme=" + c.scheme, "partition.stages=2", codecs});
  });
  EXPECT_EQ(refused.find("compression.gradients: no gradient crosses a compressed boundary") != std::string::npos, local)
      << refused;
  if (local) codecs = "compression={activations: {type: topk, fraction: 0.5, error_feedback: ef}}";
  const auto with = [&](const std::string& executor, bool compress) {
    std::vector<std::string> o{"scheme=" + c.scheme, "partition.stages=2", "run.executor=" + executor};
    if (compress) o.push_back(codecs);
    return testing::train(kSmall, o);
  };
  const TensorDict sequential = with("sequential", true);
  const TensorDict threaded = with("{type: threaded, intra_op_threads: 1}", true);
  EXPECT_TRUE(testing::identical(sequential, threaded)) << "max difference " << testing::max_difference(sequential, threaded);
  EXPECT_GT(testing::max_difference(sequential, with("sequential", false)), 1e-7);
}

INSTANTIATE_TEST_SUITE_P(Registry, CompressEveryScheme, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

}  // namespace
}  // namespace pipelab::compression_schemes_test
