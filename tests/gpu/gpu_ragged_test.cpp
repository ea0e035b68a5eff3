// Ragged text on cuda:0 (docs/models-and-data.md, "Ragged text"): the document layout comes
// from pinned batches with the inputs and targets, and the llama trains on padded and packed
// micro-batches of differing lengths, float64, to the CPU's weights (1e-9), and threaded to
// the sequential executor's bits.
#include <fmt/format.h>

#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"

namespace pipelab::gpu_ragged_test {
namespace {

std::string experiment(const std::string& collate) {
  return fmt::format(R"(
model:     {{type: llama, vocab: 16, hidden: 16, intermediate: 24, layers: 2, heads: 4, kv_heads: 2}}
dataset:   {{type: synthetic, tokens: {{vocabulary: 16, length: 10, min_length: 1}}, collate: {}, samples: 32,
            test_samples: 8}}
partition: {{stages: 2}}
scheme:    {{type: seq1f1b, chunks: 4, segments: 3}}
optimizer: {{type: adamw, lr: 0.01}}
run:       {{epochs: 1, batch_size: 16, seed: 3, dtype: float64, threads: 1, progress: false}}
)",
                     collate);
}

TEST(GpuRagged, TrainsToTheCpusWeightsAndThreadedToSequentialsBits) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  for (const char* collate : {"pad", "pack"}) {
    const std::string yaml = experiment(collate);
    const TensorDict cpu = testing::train(yaml);
    const TensorDict sequential = testing::train(yaml, {"run.devices=[cuda:0]", "run.executor=sequential"});
    const TensorDict threaded =
        testing::train(yaml, {"run.devices=[cuda:0]", "run.executor={type: threaded, intra_op_threads: 1}"});
    EXPECT_LT(testing::max_difference(cpu, sequential), 1e-9) << collate;
    EXPECT_TRUE(testing::identical(sequential, threaded)) << collate << ": " << testing::max_difference(sequential, threaded);
  }
}

}  // namespace
}  // namespace pipelab::gpu_ragged_test
