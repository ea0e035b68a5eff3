// The equivalences of docs/schemes.md, "Equivalences" for the synchronous schemes: naive model
// parallelism == single device (bit for bit), GPipe over m micro-batches == single device
// on the whole mini-batch (for every checkpoint mode), and the loss-scaling oracle (docs/schemes.md, "Batch norm and
// loss averaging").
#include <gtest/gtest.h>

#include "core/exec/actions.h"
#include "core/feed/feeds.h"
#include "core/schedule/validate.h"
#include "tests/support/helpers.h"

namespace pipelab::equivalence_test {
namespace {

// 20 steps of batch 16 (320 training examples, one epoch) of an MLP with 4 blocks.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 32, 32, 32, 4], dropout: 0.0}
dataset:   {type: synthetic, samples: 320, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 1, batch_size: 16, seed: 3}
)";

TEST(Equivalence, NaiveEqualsSingleBitForBit) {
  const TensorDict single = testing::train(kMlp);
  EXPECT_TRUE(testing::identical(single, testing::train(kMlp, {"scheme.type=naive"})));
  EXPECT_TRUE(testing::identical(single, testing::train(kMlp, {"scheme.type=naive", "partition.balance=[2, 1, 1]",
                                                               "partition.stages=3"})));
  // Dropout too: every block draws its masks from its own generator, wherever it runs.
  const TensorDict dropout = testing::train(kMlp, {"model.dropout=0.25"});
  EXPECT_TRUE(testing::identical(dropout, testing::train(kMlp, {"model.dropout=0.25", "scheme.type=naive"})));
  // ... and the run really did change the weights.
  EXPECT_GT(testing::max_difference(single, testing::train(kMlp, {"optimizer.lr=0.2"})), 1e-3);
}

TEST(Equivalence, GpipeEqualsSingleOnTheWholeMiniBatch) {
  const std::vector<std::string> f64{"run.dtype=float64"};
  const TensorDict single = testing::train(kMlp, f64);
  for (const char* mode : {"always", "except_last", "never"}) {
    for (const char* chunks : {"4", "5"}) {  // 16 = 4 x 4, and 4 + 4 + 4 + 4 by chunk semantics
      std::vector<std::string> o = f64;
      o.push_back("scheme={type: gpipe, chunks: " + std::string(chunks) + ", checkpoint: " + mode + "}");
      EXPECT_LT(testing::max_difference(single, testing::train(kMlp, o)), 1e-10) << mode << " chunks " << chunks;
    }
  }
  // Uneven micro-batches (batch 10 in 4 chunks: 3, 3, 3, 1) are weighted by their size.
  std::vector<std::string> uneven = f64;
  uneven.push_back("run.batch_size=10");
  const TensorDict single10 = testing::train(kMlp, uneven);
  uneven.push_back("scheme={type: gpipe, chunks: 4}");
  EXPECT_LT(testing::max_difference(single10, testing::train(kMlp, uneven)), 1e-10);
}

TEST(Equivalence, GpipeTestsForwardOrderBackwardEqualsSingle) {
  // gpipe_test's fill-drain (docs/schemes.md, "gpipe_test"): B0..B(m-1) on every stage.
  const auto s = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load("{type: gpipe, backward_order: forward}"), std::make_shared<ConfigSource>("t"), "scheme"));
  const Schedule schedule = s->schedule(2, 3);
  const std::vector<Action>& d0 = schedule.device(0);
  ASSERT_EQ(d0.size(), 7u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(d0[static_cast<size_t>(3 + i)].kind, ActionKind::Backward);
    EXPECT_EQ(d0[static_cast<size_t>(3 + i)].mb, i);
  }
  const std::vector<std::string> f64{"run.dtype=float64"};
  const TensorDict single = testing::train(kMlp, f64);
  std::vector<std::string> o = f64;
  o.push_back("scheme={type: gpipe, chunks: 4, backward_order: forward}");
  EXPECT_LT(testing::max_difference(single, testing::train(kMlp, o)), 1e-10);
}

TEST(Equivalence, CheckpointingChangesNothingButMemory) {
  // Recomputation runs the same kernels again, so weights agree bit for bit, dropout included.
  const std::vector<std::string> base{"model.dropout=0.25", "scheme={type: gpipe, chunks: 4, checkpoint: never}"};
  const TensorDict never = testing::train(kMlp, base);
  for (const char* mode : {"always", "except_last"}) {
    EXPECT_TRUE(testing::identical(
        never, testing::train(kMlp, {"model.dropout=0.25", "scheme={type: gpipe, chunks: 4, checkpoint: " + std::string(mode) + "}"})))
        << mode;
  }
}

/// y = w x with w = 1 (one stage), loss = mean(y^2 / 2) (docs/schemes.md, "Batch norm and loss averaging").
class HalfSquare : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor&) const override { return (out * out / 2).mean(); }
};

/// A feed that keeps the results of a run.
class Collect : public Feed {
 public:
  explicit Collect(ChunkFeed& inner) : inner_(inner) {}
  at::Tensor input(int mb) override { return inner_.input(mb); }
  at::Tensor target(int mb) override { return inner_.target(mb); }
  double loss_scale(int mb) override { return inner_.loss_scale(mb); }
  void on_result(int mb, const MicroBatchResult& r) override { inner_.on_result(mb, r); }

 private:
  ChunkFeed& inner_;
};

TEST(Equivalence, LossScalingOracle) {
  // Full-batch gradient 7.5; GPipe with M = 2 must give 7.5 too (gpipe_test's sum would be 15).
  for (int chunks : {1, 2, 4}) {
    torch::nn::Linear linear(torch::nn::LinearOptions(1, 1).bias(false));
    linear->to(at::kDouble);
    at::NoGradGuard g;
    linear->weight.fill_(1);
    StageSpec spec;
    spec.blocks = {{"w", torch::nn::AnyModule(linear)}};
    spec.loss = std::make_shared<HalfSquare>();
    Stage stage(std::move(spec));
    stage.set_optimizer(Registry<OptimizerFactory>::get()
                            .create(ConfigNode(YAML::Load("{type: sgd, lr: 1}"), std::make_shared<ConfigSource>("t"), "o"))
                            ->make(stage.parameters()));
    auto source = std::make_shared<ConfigSource>("t");
    const auto scheme = Registry<Scheme>::get().create(
        ConfigNode(YAML::Load(fmt::format("{{type: gpipe, chunks: {}}}", chunks)), source, "scheme"));
    auto policy = scheme->make_policy(stage);
    std::vector<StageSlot> slots{{&stage, policy.get()}};
    ChunkFeed feed({at::tensor({1.0, 2.0, 3.0, 4.0}, at::kDouble).reshape({4, 1}), at::zeros({4}, at::kLong)}, chunks,
                   at::kDouble);
    const Schedule s = scheme->schedule(1, feed.count());
    validate_schedule(s);
    auto executor = Registry<Executor>::get().create_default("sequential");
    at::AutoGradMode grad(true);
    // Run F and B only (drop the update) to read the accumulated gradient.
    Schedule fb(1);
    for (const Action& a : s.device(0)) {
      if (a.kind != ActionKind::Update) fb.device(0).push_back(a);
    }
    executor->run(fb, slots, feed, RunMode::Train);
    EXPECT_DOUBLE_EQ(linear->weight.grad().item<double>(), 7.5) << chunks << " chunks";
    EXPECT_DOUBLE_EQ(feed.totals().loss, 3.75);  // mean of y^2/2 = (1 + 4 + 9 + 16) / 8
  }
}

}  // namespace
}  // namespace pipelab::equivalence_test
