// Replicas of a pipeline (partition.replicas; core/schedule/replicate.h): the replicated
// schedule as data, the synchronous schemes x 2 replicas equal to single-device training on
// the whole mini-batch (float64), the asynchronous ones equal to themselves on one pipeline,
// dp as single with replicas, sequential == threaded bit for bit for every scheme that takes
// replicas, and a clear refusal for the one that does not.
#include <gtest/gtest.h>

#include "core/exec/actions.h"
#include "core/feed/feeds.h"
#include "core/schedule/dataflow.h"
#include "core/schedule/generators.h"
#include "core/schedule/lower.h"
#include "core/schedule/replicate.h"
#include "core/schedule/validate.h"
#include "core/scheme/replicas.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::replicas_test {
namespace {

TEST(Replicas, TheScheduleIsTheSchemesOnFreshStagesDevicesAndMicroBatches) {
  const Schedule one = lower(schedules::gpipe(2, 2));
  const Schedule two = replicate({one, one});
  EXPECT_EQ(two.replicas(), 2);
  EXPECT_EQ(two.stages(), 4);
  EXPECT_EQ(two.pipeline_stages(), 2);
  EXPECT_EQ(two.devices(), 4);
  // Replica 1: stages 2, 3 on devices d2, d3, micro-batches 2, 3; every U after an ALLREDUCE.
  EXPECT_EQ(two.compute_only().to_text(),
            "d0: 0F0 0F1 0B1 0B0 0U\nd1: 1F0 1F1 1B1 1B0 1U\nd2: 2F2 2F3 2B3 2B2 2U\nd3: 3F2 3F3 3B3 3B2 3U\n");
  for (int d = 0; d < 4; ++d) {
    const auto& actions = two.device(d);
    ASSERT_GE(actions.size(), 2u);
    EXPECT_EQ(actions[actions.size() - 2], Action::all_reduce(d)) << "device d" << d;
  }
  // Stage 0 and stage 2 are one collective group, 1 and 3 the other; nothing else is shared.
  EXPECT_EQ(two.collective_group(2), 0);
  EXPECT_EQ(two.collective_group(3), 1);
  EXPECT_EQ(two.replica_of(3), 1);
  // Replicas never exchange messages: every SEND's peer is a stage of its own replica.
  for (int d = 0; d < two.devices(); ++d) {
    for (const Action& a : two.device(d)) {
      if (is_send(a.kind) || is_receive(a.kind)) EXPECT_EQ(two.replica_of(peer(a)), two.replica_of(a.stage)) << a.str();
    }
  }
  ValidateOptions rules;
  rules.coverage = Coverage::EveryStage;
  rules.training = true;
  EXPECT_NO_THROW(validate_schedule(two, rules));
  // A replica without a share of the mini-batch still joins its stages' all-reduces.
  const Schedule uneven = replicate({one, updates_only(one)});
  EXPECT_EQ(uneven.device(2).size(), 2u);
  EXPECT_EQ(uneven.device(2).front(), Action::all_reduce(2));
  EXPECT_NO_THROW(validate_schedule(uneven, rules));
  // The action interpreter tells each stage its replica's micro-batches (a scheme counts its
  // own from 0): replica 1's stages run the schedule's micro-batches 2 and 3.
  const std::vector<ReplicaMicroBatches> own = replica_micro_batches(two);
  ASSERT_EQ(own.size(), 4u);
  EXPECT_EQ(own[1].first, 0);
  EXPECT_EQ(own[1].count, 2);
  EXPECT_EQ(own[3].first, 2);
  EXPECT_EQ(own[3].count, 2);
  EXPECT_EQ(replica_micro_batches(uneven)[2].count, 0);
}

TEST(Replicas, AStagesAllReduceWaitsForItsOwnReplicasOnly) {
  // Stage 1's replicas (1 and 3) reach their all-reduce before stage 0's do: the walk runs
  // them without waiting for stages 0 and 2, which it would if ALLREDUCE were every device's.
  Schedule s = Schedule::parse("d0: 0F0 0SEND_F0 0RECV_B0 0B0 0ALLREDUCE 0U\n"
                               "d1: 1RECV_F0 1F0 1B0 1SEND_B0 1ALLREDUCE 1U\n"
                               "d2: 2F1 2SEND_F1 2RECV_B1 2B1 2ALLREDUCE 2U\n"
                               "d3: 3RECV_F1 3F1 3B1 3SEND_B1 3ALLREDUCE 3U\n");
  s.set_replicas(2);
  std::vector<std::string> order;
  EXPECT_TRUE(walk_schedule(s, [&](int d, size_t i) { order.push_back(s.device(d)[i].str()); }).complete);
  const auto at = [&](const std::string& a) { return std::find(order.begin(), order.end(), a) - order.begin(); };
  EXPECT_LT(at("3U"), at("0ALLREDUCE"));
  EXPECT_LT(at("1U"), at("2ALLREDUCE"));
}

// 4 blocks, float64, 2 epochs of batch 16.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 2, batch_size: 16, seed: 3, dtype: float64}
)";

TEST(Replicas, SynchronousSchemesTimesTwoReplicasEqualSingle) {
  const TensorDict single = testing::train(kMlp);
  const std::vector<std::vector<std::string>> cases{
      {"scheme={type: gpipe, chunks: 4}"},
      {"scheme={type: pipedream_flush, chunks: 4}"},
      {"scheme={type: interleaved_1f1b, chunks: 4, virtual_stages: 2}", "partition.stages=4"},
      {"scheme={type: zb_h1, chunks: 4}"},
      {"scheme={type: gpipe, chunks: 4}", "partition.replicas=3"},  // 16 = 6 + 6 + 4
  };
  for (std::vector<std::string> o : cases) {
    if (o.size() == 1 || o.back().rfind("partition.stages", 0) == 0) o.push_back("partition.replicas=2");
    EXPECT_LT(testing::max_difference(single, testing::train(kMlp, o)), 1e-10) << o.front() << " " << o.back();
  }
  // A mini-batch smaller than replicas x chunks (10 = 5 + 5, each in chunks of 2, 2, 1).
  const TensorDict single10 = testing::train(kMlp, {"run.batch_size=10"});
  EXPECT_LT(testing::max_difference(single10, testing::train(kMlp, {"run.batch_size=10", "partition.replicas=2",
                                                                     "scheme={type: gpipe, chunks: 4}"})),
            1e-10);
}

/// The summary's bytes per step of `kind` (0 when it moved none).
double traffic(const RunSummary& s, ActionKind kind) {
  for (const auto& [k, bytes] : s.traffic_per_step) {
    if (k == kind) return bytes;
  }
  return 0;
}

TEST(Replicas, TheSummaryCountsTheGradientsEachAllReduceGathers) {
  // gpipe, 2 stages x 2 replicas, float64: each step, every stage brings its whole gradient
  // to its all-reduce, so the four bring two models' worth: 2 x 1612 parameters x 8 bytes
  // (mlp 12-24-24-24-4: 312 + 600 + 600 + 100 parameters).
  const auto run = [](const std::vector<std::string>& overrides) {
    testing::TempDir dir;
    Experiment e = testing::experiment(kMlp, dir.file("run"), overrides);
    RunnerOptions o;
    o.quiet = true;
    return Runner(e, o).run();
  };
  const RunSummary two = run({"scheme={type: gpipe, chunks: 2}", "partition.replicas=2"});
  EXPECT_DOUBLE_EQ(traffic(two, ActionKind::AllReduce), 2 * 1612 * 8);
  // The activations: micro-batches of 4 examples x 24 float64 values, 4 per step (2 per replica).
  EXPECT_DOUBLE_EQ(traffic(two, ActionKind::SendF), 4 * 4 * 24 * 8);
  const RunSummary one = run({"scheme={type: gpipe, chunks: 2}"});
  EXPECT_EQ(traffic(one, ActionKind::AllReduce), 0) << "no replicas, no all-reduce";
  EXPECT_DOUBLE_EQ(traffic(one, ActionKind::SendF), 2 * 8 * 24 * 8);
}

TEST(Replicas, DpIsSingleWithReplicas) {
  const TensorDict dp = testing::train(kMlp, {"scheme={type: dp, replicas: 3}"});
  EXPECT_TRUE(testing::identical(dp, testing::train(kMlp, {"partition.replicas=3"})));
  EXPECT_LT(testing::max_difference(dp, testing::train(kMlp)), 1e-10);
  const std::string e = testing::user_error([] { testing::train(kMlp, {"scheme={type: dp, replicas: 3}", "partition.replicas=2"}); });
  EXPECT_NE(e.find("partition.replicas"), std::string::npos) << e;
  EXPECT_NE(e.find("sets its own replicas (3)"), std::string::npos) << e;
}

/// A feed of mini-batches k = 0, 1, ... of 5 examples whose inputs are 10k + 0..4, and
/// that keeps what it is told.
class Mini : public Feed {
 public:
  at::Tensor input(int k) override { return at::arange(5, at::kDouble) + 10.0 * k; }
  at::Tensor target(int k) override { return at::arange(5, at::kLong) + 10 * k; }
  double loss_scale(int) override { return 0.5; }
  void on_result(int k, const MicroBatchResult& r) override {
    order.push_back(k);
    losses.push_back(r.loss.item<double>());
    counts.push_back(r.count);
  }
  std::vector<int> order;
  std::vector<double> losses;
  std::vector<int64_t> counts;
};

TEST(Replicas, EachReplicaGetsItsShareOfTheSameMiniBatchAndTheResultsComeBackWhole) {
  Mini mini;
  ReplicaFeed feed(mini, 2, 3);  // 2 replicas x 3 micro-batches: ids 0..2 and 3..5
  // Replica 1's micro-batch 1 (id 4) is the last 2 examples of mini-batch 1 (5 = 3 + 2).
  EXPECT_TRUE(feed.input(4).equal(at::tensor({13.0, 14.0}, at::kDouble)));
  EXPECT_TRUE(feed.target(4).equal(at::tensor({13, 14}, at::kLong)));
  EXPECT_DOUBLE_EQ(feed.loss_scale(4), 0.5 * 2 / 5);
  EXPECT_TRUE(feed.input(1).equal(at::tensor({10.0, 11.0, 12.0}, at::kDouble)));
  EXPECT_DOUBLE_EQ(feed.loss_scale(1), 0.5 * 3 / 5);
  for (const int id : {0, 3, 2, 5}) feed.input(id);
  const auto result = [](double loss, int64_t count) {
    return MicroBatchResult{at::scalar_tensor(loss, at::kDouble), at::scalar_tensor(int64_t{1}), count};
  };
  // Replica 1 finishes first, and mini-batch 1 before 0: nothing is reported until 0 is whole.
  feed.on_result(4, result(0.25, 2));
  feed.on_result(3, result(0.5, 2));
  EXPECT_TRUE(mini.order.empty());
  feed.on_result(1, result(1.0, 3));
  EXPECT_TRUE(mini.order.empty());
  feed.on_result(0, result(2.0, 3));
  EXPECT_EQ(mini.order, (std::vector<int>{0, 1}));
  EXPECT_EQ(mini.losses, (std::vector<double>{2.5, 1.25}));
  EXPECT_EQ(mini.counts, (std::vector<int64_t>{5, 5}));
  // In a process of a multi-process run (one replica's stages ask): the same shares, unkept.
  ReplicaFeed process(mini, 2, 3, false);
  EXPECT_TRUE(process.input(4).equal(at::tensor({13.0, 14.0}, at::kDouble)));
  EXPECT_TRUE(process.input(4).equal(at::tensor({13.0, 14.0}, at::kDouble)));
  EXPECT_TRUE(process.target(1).equal(at::tensor({10, 11, 12}, at::kLong)));
  EXPECT_DOUBLE_EQ(process.loss_scale(4), 0.5 * 2 / 5);
}

TEST(Replicas, InterlockingsHeadsAreRefusedClearly) {
  const std::string e = testing::user_error([] { testing::train(kMlp, {"scheme={type: interlocking}", "partition.replicas=2"}); });
  EXPECT_NE(e.find("partition.replicas"), std::string::npos) << e;
  EXPECT_NE(e.find("scheme interlocking trains auxiliary heads"), std::string::npos) << e;
  EXPECT_NE(e.find("Fix:"), std::string::npos) << e;
}

TEST(Replicas, AMiniBatchSmallerThanTheReplicasIsRefusedClearly) {
  const std::string e = testing::user_error(
      [] { testing::train(kMlp, {"scheme={type: pipedream}", "partition.replicas=3", "run.batch_size=2"}); });
  EXPECT_NE(e.find("run.batch_size"), std::string::npos) << e;
  EXPECT_NE(e.find("3 replicas each take a share"), std::string::npos) << e;
}

// The asynchronous schemes (their schedule spans an epoch or the run) x 2 replicas: each
// replica's share of a mini-batch meets the same weight version, so the all-reduced gradient
// is the whole mini-batch's and the run equals the scheme on one pipeline (float64). That is
// the definition of their replicas, checked for every registered variant at 2 stages.
class AsyncReplicas : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(AsyncReplicas, TwoReplicasEqualOnePipelineOnTheWholeMiniBatch) {
  const testing::SchemeCase& c = GetParam();
  if (c.stages != 2) GTEST_SKIP() << "2 stages only";
  const auto scheme = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load(c.scheme), std::make_shared<ConfigSource>("case"), "scheme"));
  if (scheme->span() == Span::MiniBatch) GTEST_SKIP() << "flushes every mini-batch: SynchronousSchemesTimesTwoReplicasEqualSingle";
  if (!replicas_refused(*scheme, 2).empty()) GTEST_SKIP() << "refused: InterlockingsHeadsAreRefusedClearly";
  std::vector<std::string> o{"scheme=" + c.scheme};
  // FTPipe refuses its msnag predictor with weight decay (its formula in docs/schemes.md, "ftpipe" has
  // no decay term).
  if (c.scheme.find("predictor: msnag") != std::string::npos) o.push_back("optimizer.weight_decay=0");
  const TensorDict one = testing::train(kMlp, o);
  o.push_back("partition.replicas=2");
  const TensorDict two = testing::train(kMlp, o);
  EXPECT_LT(testing::max_difference(one, two), 1e-10);
  EXPECT_FALSE(testing::identical(one, testing::train(kMlp, {"scheme={type: single}"})))
      << "the scheme's staleness must show, or the equality says nothing about replicas of it";
}

INSTANTIATE_TEST_SUITE_P(Registry, AsyncReplicas, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

// Every registered scheme at 2 stages x 2 replicas: sequential == threaded bit for bit
// (dropout and batch norm in the model; micro-batches of at least 2 examples, as batch
// norm's unbiased variance needs), or a clear refusal.
class ReplicaExecutors : public ::testing::TestWithParam<testing::SchemeCase> {};

const char* kNoisy = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4], dropout: 0.1, batch_norm: true}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 2, replicas: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 32, seed: 3, threads: 1}
)";

TEST_P(ReplicaExecutors, ThreadedEqualsSequentialBitwise) {
  const testing::SchemeCase& c = GetParam();
  if (c.stages != 2) GTEST_SKIP() << "2 stages x 2 replicas only";
  std::vector<std::string> common{"scheme=" + c.scheme};
  if (c.scheme.find("type: dp") != std::string::npos) common.push_back("partition.replicas=1");
  const auto with = [&](const std::string& executor) {
    std::vector<std::string> o = common;
    o.push_back("run.executor=" + executor);
    return testing::train(kNoisy, o);
  };
  const auto scheme = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load(c.scheme), std::make_shared<ConfigSource>("case"), "scheme"));
  if (!replicas_refused(*scheme, 2).empty()) {
    const std::string e = testing::user_error([&] { with("sequential"); });
    EXPECT_NE(e.find("partition.replicas"), std::string::npos) << e;
    return;
  }
  const TensorDict sequential = with("sequential");
  const TensorDict threaded = with("{type: threaded, intra_op_threads: 1}");
  EXPECT_TRUE(testing::identical(sequential, threaded)) << "max difference " << testing::max_difference(sequential, threaded);
}

INSTANTIATE_TEST_SUITE_P(Registry, ReplicaExecutors, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

}  // namespace
}  // namespace pipelab::replicas_test
