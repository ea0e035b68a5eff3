// metrics/costs.json (core/records/stage_costs.h): the measured per-stage costs a run writes
// next to its trace, checked against figures computed by hand from the model's sizes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/helpers.h"

namespace pipelab::stage_costs_test {
namespace {

// fc1 12->24 and fc2 24->24 on stage 0; fc3 24->24 and fc4 24->4 on stage 1.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 2, balance: [2, 2]}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 1}
)";

nlohmann::json costs(const std::vector<std::string>& overrides) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("run"), overrides);
  RunnerOptions options;
  options.quiet = true;
  Runner(e, options).run();
  return nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
}

TEST(StageCosts, CostsJsonHoldsTheMeasuredStageCosts) {
  const nlohmann::json c = costs({"run.executor=threaded"});
  EXPECT_EQ(c["format"], "pipelab-stage-costs");
  EXPECT_EQ(c["version"], 1);
  EXPECT_EQ(c["executor"], "threaded");
  EXPECT_EQ(c["scheme"], "gpipe");
  EXPECT_EQ(c["micro_batches"], 4);
  EXPECT_EQ(c["micro_batch_size"], 4);  // 16 examples in 4 micro-batches
  EXPECT_EQ(c["dtype"], "float32");
  EXPECT_EQ(c["steps"], 4);  // 64 / 16 mini-batches in the traced epoch, one run each
  EXPECT_GT(c["step_seconds"].get<double>(), 0);
  ASSERT_EQ(c["stages"].size(), 2u);
  const nlohmann::json& s0 = c["stages"][0];
  const nlohmann::json& s1 = c["stages"][1];
  EXPECT_EQ(s0["stage"], 0);
  EXPECT_EQ(s1["device"], 1);
  for (const auto* s : {&s0, &s1}) {
    EXPECT_GT((*s)["forward"].get<double>(), 0);
    EXPECT_GT((*s)["backward"].get<double>(), 0);
    EXPECT_GT((*s)["update"].get<double>(), 0);
    EXPECT_EQ((*s)["backward_input"], 0.0);  // never split
    EXPECT_GT((*s)["retained_bytes"].get<int64_t>(), 0);
    EXPECT_GE((*s)["peak_activation_bytes"].get<int64_t>(), 4 * (*s)["retained_bytes"].get<int64_t>());
    EXPECT_EQ((*s)["stored_versions"], 1);
    EXPECT_EQ((*s)["buffer_bytes"], 0);
  }
  // A micro-batch's activation: 4 examples x 24 floats; the gradient back is the same size.
  EXPECT_EQ(s0["activation_bytes"], 4 * 24 * 4);
  EXPECT_EQ(s1["activation_bytes"], 0);
  EXPECT_EQ(s0["gradient_bytes"], 0);
  EXPECT_EQ(s1["gradient_bytes"], 4 * 24 * 4);
  // Weights and biases, 4 bytes each.
  EXPECT_EQ(s0["parameter_bytes"], (12 * 24 + 24 + 24 * 24 + 24) * 4);
  EXPECT_EQ(s1["parameter_bytes"], (24 * 24 + 24 + 24 * 4 + 4) * 4);
  // SGD with momentum keeps one buffer per parameter.
  EXPECT_EQ(s0["optimizer_bytes"], s0["parameter_bytes"]);
  EXPECT_EQ(s1["optimizer_bytes"], s1["parameter_bytes"]);
}

TEST(StageCosts, ReplicasFiguresAreForTheirShareOfTheMiniBatch) {
  // Two replicas of the pipeline take 8 of the 16 examples each and cut them into 4
  // micro-batches of 2: the messages, and the size the replay scales the seconds from.
  const nlohmann::json c = costs({"run.executor=threaded", "partition.replicas=2"});
  EXPECT_EQ(c["micro_batches"], 4);
  EXPECT_EQ(c["micro_batch_size"], 2);
  EXPECT_EQ(c["stages"][0]["activation_bytes"], 2 * 24 * 4);
}

TEST(StageCosts, PlainSgdHasNoOptimizerState) {
  const nlohmann::json c = costs({"optimizer={type: sgd, lr: 0.05}"});
  EXPECT_EQ(c["executor"], "sequential");
  for (const auto& s : c["stages"]) EXPECT_EQ(s["optimizer_bytes"], 0);
}

}  // namespace
}  // namespace pipelab::stage_costs_test
