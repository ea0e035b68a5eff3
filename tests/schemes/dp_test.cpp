// The data-parallel baseline: N replicas equal single-device training on the whole batch
// without batch norm (docs/schemes.md, "data parallelism"), and keep their own batch-norm statistics with it.
#include <gtest/gtest.h>

#include "core/records/state_dict.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "tests/support/helpers.h"

namespace pipelab::dp_test {
namespace {

TEST(DataParallel, EqualsSingleOnTheWholeBatchWithoutBatchNorm) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [12, 24, 24, 4]}
dataset:   {type: synthetic, samples: 192, test_samples: 32, shape: [12], classes: 4}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 2, batch_size: 24, dtype: float64}
)";
  const TensorDict single = testing::train(yaml);
  for (const char* n : {"2", "3", "4"}) {
    EXPECT_LT(testing::max_difference(single, testing::train(yaml, {std::string("scheme={type: dp, replicas: ") + n + "}"})),
              1e-12)
        << n << " replicas";
  }
  // 24 examples in 5 shards of ceil(24/5) = 5: 5, 5, 5, 5, 4 (chunk semantics), still exact.
  EXPECT_LT(testing::max_difference(single, testing::train(yaml, {"scheme={type: dp, replicas: 5}"})), 1e-12);
}

TEST(DataParallel, ReplicasKeepTheirOwnBatchNormStatistics) {
  const char* yaml = R"(
model:     {type: cnn, channels: [4], hidden: 8, batch_norm: true}
dataset:   {type: synthetic, samples: 16, test_samples: 8, shape: [1, 8, 8], classes: 3}
scheme:    {type: dp, replicas: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16, dtype: float64}
)";
  testing::TempDir dir;
  Experiment e = testing::experiment(yaml, dir.file("dp"));
  Runner runner(e, {false, true});
  runner.run();
  const TensorDict r0 = model_state({runner.stages()[0]}), r1 = model_state({runner.stages()[1]});
  const TensorDict single = testing::train(yaml, {"scheme={type: single}"});
  const auto get = [](const TensorDict& d, const std::string& name) {
    for (const auto& [k, v] : d) {
      if (k == name) return v;
    }
    return at::Tensor();
  };
  // One step from running mean 0 with momentum 0.1: each replica holds 0.1 x its shard's
  // channel means; the whole batch's is their average (equal shards).
  const at::Tensor m0 = get(r0, "conv1.bn.running_mean"), m1 = get(r1, "conv1.bn.running_mean");
  EXPECT_GT((m0 - m1).abs().max().item<double>(), 1e-6);
  EXPECT_LT(((m0 + m1) / 2 - get(single, "conv1.bn.running_mean")).abs().max().item<double>(), 1e-12);
  // The variances do not average to the whole batch's (the shards' means differ).
  const at::Tensor v0 = get(r0, "conv1.bn.running_var"), v1 = get(r1, "conv1.bn.running_var");
  EXPECT_GT(((v0 + v1) / 2 - get(single, "conv1.bn.running_var")).abs().max().item<double>(), 1e-6);
  // The weights stay identical across replicas, and the checkpoint is one replica's model.
  EXPECT_TRUE(at::equal(get(r0, "conv1.conv.weight"), get(r1, "conv1.conv.weight")));
  EXPECT_EQ(load_tensor_dict(dir.file("dp/checkpoints/final.pt")).size(), r0.size());
}

TEST(DataParallel, TheAllReduceIsAnActionOfEveryReplica) {
  const auto dp = Registry<Scheme>::get().create_default("dp");
  const Schedule s = replicated_schedule(*dp, 1, {1, 1, 0});  // three replicas, a mini-batch with two shards
  // Each replica reads its own shard (no RECV_F), nothing travels between replicas but the
  // all-reduce, which every replica joins before its update.
  EXPECT_EQ(s.to_text(), "d0: 0F0 0B0 0ALLREDUCE 0U\nd1: 1F1 1B1 1ALLREDUCE 1U\nd2: 2ALLREDUCE 2U\n");
  EXPECT_EQ(s.replicas(), 3);
  EXPECT_NO_THROW(validate_schedule(s, replicated_rules(*dp, 1, 3)));
  Schedule missing = s;
  missing.device(2).clear();  // a replica that never joins would leave the others waiting
  EXPECT_NE(testing::user_error([&] { validate_schedule(missing); }).find("device d2 has no actions"),
            std::string::npos);
  // A collective one device reaches only after a message the other sends after the
  // collective: a cycle, which the validator finds.
  const std::string msg = testing::user_error([] {
    Schedule s = Schedule::parse("0F0 0SEND_F0 0RECV_B0 0B0 0ALLREDUCE 0U\n"
                                 "1RECV_F0 1F0 1ALLREDUCE 1B0 1SEND_B0 1U");
    s.set_replicas(2);
    validate_schedule(s);
  });
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
  EXPECT_NE(msg.find("device d1 stops at '1ALLREDUCE' at schedule:2:14, waiting for the other devices' ALLREDUCE"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pipelab::dp_test
