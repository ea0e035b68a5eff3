// Short runs on real data: dataset.limit and dataset.test_limit (a seeded subset, the same for
// every run.seed, kept in file order) and run.max_steps (the run stops at a step count, the
// epoch that reaches it being the last).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/data/subset.h"
#include "tests/support/helpers.h"

namespace pipelab::limits_test {
namespace {

TEST(Limits, ASeededSubsetInFileOrder) {
  auto data = std::make_shared<TensorDataset>(at::arange(100, at::kFloat).view({100, 1}), at::arange(100, at::kLong));
  const auto a = subset(data, 10, 0), b = subset(data, 10, 0);
  ASSERT_EQ(a->size(), 10);
  const at::Tensor ya = a->get({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0).y;
  EXPECT_TRUE(at::equal(ya, b->get({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0).y));
  EXPECT_TRUE(at::equal(ya, std::get<0>(at::sort(ya))));              // in file order
  EXPECT_GT(ya.max().item<int64_t>() - ya.min().item<int64_t>(), 50);  // spread, not the first ten
  EXPECT_EQ(subset(data, 0, 0), data);
  EXPECT_EQ(subset(data, 100, 0), data);
}

const char* kRun = R"(
model:     {type: mlp, sizes: [8, 16, 4]}
dataset:   {type: synthetic, samples: 160, test_samples: 64, shape: [8], classes: 4, limit: 48, test_limit: 16}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 2, batch_size: 16, seed: 3, threads: 1, progress: false}
)";

int64_t lines(const std::string& text) { return static_cast<int64_t>(std::count(text.begin(), text.end(), '\n')); }

TEST(Limits, ALimitedRunTrainsAndTestsOnItsSubsets) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kRun, dir.file("run"));
  Runner runner(e, {false, true});
  const RunSummary s = runner.run();
  ASSERT_EQ(s.history.size(), 2u);
  EXPECT_EQ(lines(testing::read_text(dir.file("run/metrics/steps.csv"))), 1 + 2 * 3);  // 48 / 16 per epoch
  // 16 test examples: accuracy in steps of 6.25%.
  EXPECT_NEAR(std::fmod(s.history.back().test_acc, 6.25), 0.0, 1e-9);
  const std::string config = testing::read_text(dir.file("run/config.yaml"));
  EXPECT_NE(config.find("limit: 48"), std::string::npos) << config;
  EXPECT_NE(config.find("test_limit: 16"), std::string::npos) << config;
  EXPECT_NE(testing::read_text(dir.file("run/log.txt")).find("limits: training on 48 of 160 examples, testing on 16 of 64"),
            std::string::npos);
}

TEST(Limits, MaxStepsEndsTheRunInTheEpochThatReachesIt) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kRun, dir.file("run"), {"run.epochs=9", "run.max_steps=7"});
  Runner runner(e, {false, true});
  const RunSummary s = runner.run();
  EXPECT_EQ(s.history.size(), 3u);  // 3 + 3 + 1 steps
  EXPECT_EQ(lines(testing::read_text(dir.file("run/metrics/steps.csv"))), 1 + 7);
  EXPECT_NE(testing::read_text(dir.file("run/config.yaml")).find("max_steps: 7"), std::string::npos);
  // Runs without the keys keep their config.yaml as before.
  testing::TempDir plain;
  Experiment p = testing::experiment(kRun, plain.file("run"), {"dataset={type: synthetic, samples: 160, shape: [8], classes: 4}"});
  Runner(p, {false, true}).run();
  const std::string config = testing::read_text(plain.file("run/config.yaml"));
  EXPECT_EQ(config.find("limit"), std::string::npos);
  EXPECT_EQ(config.find("max_steps"), std::string::npos);
}

TEST(Limits, MistakesAreNamed) {
  EXPECT_NE(testing::user_error([] { testing::experiment(kRun, "", {"dataset.limit=-1"}); }).find("dataset.limit"),
            std::string::npos);
  const std::string never = testing::user_error([] {
    testing::train(kRun, {"scheme={type: pipedream, flush: never}", "run.max_steps=3"});
  });
  EXPECT_NE(never.find("never flushes its pipeline"), std::string::npos) << never;
}

}  // namespace
}  // namespace pipelab::limits_test
