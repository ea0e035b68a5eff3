#include "tests/tools/launch_support.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/io/pt_file.h"
#include "tests/support/helpers.h"

namespace pipelab::testing {

std::pair<int, std::string> pipelab(const std::string& args) {
  return shell("OMP_NUM_THREADS=1 " + std::string(PIPELAB_BINARY) + " " + args);
}

const char* const kExperiment = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 128, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 1, threads: 1, progress: false}
)";

const char* const kEverySchemeMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4], dropout: 0.1, batch_norm: true}
dataset:   {type: synthetic, samples: 64, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 3, threads: 1, progress: false}
)";

namespace {

/// The traffic columns (bytes forward and backward per step) of every line of epochs.csv.
std::string traffic(const std::string& run) {
  std::istringstream in(read_text(run + "/metrics/epochs.csv"));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const size_t last = line.rfind(','), before = line.rfind(',', last - 1);
    out += line.substr(before + 1) + "\n";
  }
  return out;
}

}  // namespace

void expect_same_run(const std::string& a, const std::string& b) {
  EXPECT_TRUE(identical(load_tensor_dict(a + "/checkpoints/final.pt"), load_tensor_dict(b + "/checkpoints/final.pt")));
  EXPECT_EQ(read_text(a + "/metrics/epochs.csv").substr(0, 40), read_text(b + "/metrics/epochs.csv").substr(0, 40));
  // Every process counts what it sent; the figures are the sums (not the writer's share).
  EXPECT_EQ(traffic(a), traffic(b));
  EXPECT_EQ(read_text(a + "/metrics/steps.csv"), read_text(b + "/metrics/steps.csv"));
}

}  // namespace pipelab::testing
