// A vision model trains through the runner: a ResNet-18 on 3x16x16 synthetic images, two
// GPipe stages.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::training_test {
namespace {

const char* kResnet = R"(
model:     {type: resnet, depth: 18}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [3, 16, 16], classes: 4}
partition: {stages: 2, balance: auto}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.01, momentum: 0.9, weight_decay: 5.0e-4}
run:       {epochs: 1, batch_size: 16, seed: 0}
)";

TEST(ZooTraining, Resnet18TrainsAnEpochOnTwoGpipeStages) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kResnet, dir.file("run"));
  RunnerOptions options;
  options.quiet = true;
  Runner runner(e, options);
  EXPECT_EQ(runner.stage_count(), 2);
  EXPECT_EQ(testing::total(runner.balance()), 10);
  const RunSummary summary = runner.run();
  EXPECT_EQ(summary.status, "finished");
  ASSERT_EQ(summary.history.size(), 1u);
  EXPECT_TRUE(std::isfinite(summary.history[0].train_loss));
  EXPECT_TRUE(std::isfinite(summary.history[0].test_loss));
  EXPECT_GT(summary.history[0].train_loss, 0.0);
  EXPECT_EQ(summary.parameters, 11173962 - 10 * 512 + 4 * 512 - 10 + 4);  // a 4-way fc
}

}  // namespace
}  // namespace pipelab::training_test
