// Sequential == threaded, bit for bit, for every registered scheme (the registry decides
// the cases, so a new scheme is covered the day it is registered), with 2 and 4 stages.
#include <gtest/gtest.h>

#include "core/scheme/scheme.h"
#include "tests/support/helpers.h"

namespace pipelab {
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

struct Case {
  std::string scheme;  ///< the scheme section
  int stages;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name;
  for (const char c : info.param.scheme) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_" + std::to_string(info.param.stages) + "stages";
}

/// Every registered scheme with its defaults, plus the variants whose routes or weight
/// policies differ (the message kinds and barriers the executors must carry).
std::vector<Case> cases() {
  const std::map<std::string, std::vector<std::string>> variants{
      {"gpipe", {"chunks: 4, checkpoint: always"}},
      {"pipedream", {"flush: never", "vertical_sync: true"}},
      {"spectrain", {"version: 2"}},
      {"interlocking", {"mode: local", "mode: pairwise", "mode: nwise, distance: 2"}},
  };
  std::vector<Case> out;
  for (const std::string& name : Registry<Scheme>::get().names()) {
    std::vector<std::string> options{""};
    if (variants.count(name)) {
      for (const std::string& v : variants.at(name)) options.push_back(v);
    }
    for (const std::string& option : options) {
      for (const int stages : {2, 4}) {
        // dp's stages are its replicas.
        const std::string extra = name == "dp" ? fmt::format("replicas: {}", stages) : option;
        if (name == "dp" && !option.empty()) continue;
        out.push_back({fmt::format("{{type: {}{}{}}}", name, extra.empty() ? "" : ", ", extra), stages});
      }
    }
  }
  return out;
}

class ExecutorEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ExecutorEquivalence, ThreadedEqualsSequentialBitwise) {
  const Case& c = GetParam();
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

INSTANTIATE_TEST_SUITE_P(Registry, ExecutorEquivalence, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace pipelab
