// The one-step-delayed pipeline with Muon (docs/schemes.md, "Notation and optimizers") is pipedream_2bw with
// `optimizer: muon`: its oracle in docs/schemes.md, "Notation and optimizers" on two stages, h = W0 x and y = W1 (h,
// 1), against the torch float32 figures the doc gives for step 3, synchronous (gpipe) and delayed; and 2BW's delay is
// the only difference in step 1.
#include <gtest/gtest.h>

#include "core/schedule/lower.h"
#include "core/weights/weights.h"
#include "tests/support/helpers.h"

namespace pipelab::delayed_muon_test {
namespace {

/// h = x W^T with W a 1 x 2 matrix, optionally on (x, 1).
struct RowImpl : torch::nn::Module {
  RowImpl(float a, float b, bool append_one) : append_one(append_one) {
    w = register_parameter("w", at::tensor({a, b}).view({1, 2}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor in = append_one ? at::cat({x, at::ones_like(x)}, 1) : x;
    return at::matmul(in, w.t());
  }
  bool append_one;
  at::Tensor w;
};
TORCH_MODULE(Row);

class HalfSquaredError : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor& t) const override {
    return ((out - t).pow(2) / 2).mean();
  }
  at::Tensor correct(const at::Tensor&, const at::Tensor&) const override { return at::zeros({}, at::kLong); }
};

/// The three samples of the delayed-Muon oracle (docs/schemes.md, "Notation and optimizers"), one per mini-batch.
class Samples : public Feed {
 public:
  explicit Samples(int offset) : offset_(offset) {}
  at::Tensor input(int mb) override {
    static const float x[3][2] = {{1, 2}, {2, -1}, {-1, 1}};
    const int u = mb + offset_;
    return at::tensor({x[u][0], x[u][1]}).view({1, 2});
  }
  at::Tensor target(int mb) override {
    static const float t[3] = {0.5f, -1.f, 0.f};
    return at::full({1, 1}, t[mb + offset_]);
  }
  double loss_scale(int) override { return 1; }
  void on_result(int, const MicroBatchResult&) override {}

 private:
  int offset_;
};

/// W0 and W1 after `steps` steps of `scheme_yaml` with the oracle's Muon (lr 0.1, no decay, mu 0.95,
/// Nesterov, rho 1 for a 1 x 2 weight).
std::vector<at::Tensor> run(const std::string& scheme_yaml, int steps) {
  const auto source = std::make_shared<ConfigSource>("t");
  auto scheme = Registry<Scheme>::get().create(ConfigNode(YAML::Load(scheme_yaml), source, "scheme"));
  auto optimizer = Registry<OptimizerFactory>::get().create(
      ConfigNode(YAML::Load("{type: muon, lr: 0.1, weight_decay: 0, momentum: 0.95}"), source, "optimizer"));
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<StageSlot> slots;
  for (int r = 0; r < 2; ++r) {
    StageSpec spec;
    spec.index = r;
    spec.count = 2;
    spec.blocks = {{fmt::format("row{}", r), torch::nn::AnyModule(r == 0 ? Row(0.5f, 0.25f, false) : Row(1.f, 0.5f, true))}};
    if (r == 1) spec.loss = std::make_shared<HalfSquaredError>();
    stages.push_back(std::make_unique<Stage>(std::move(spec)));
    stages.back()->set_optimizer(optimizer->make(stages.back()->parameters()));
    policies.push_back(scheme->make_policy(*stages.back()));
    slots.push_back({stages.back().get(), policies.back().get()});
  }
  auto executor = Registry<Executor>::get().create_default("sequential");
  if (scheme->span() == Span::MiniBatch) {
    for (int k = 0; k < steps; ++k) {
      Samples feed(k);
      executor->run(with_communication(scheme->schedule(2, 1)), slots, feed, RunMode::Train);
    }
  } else {
    Samples feed(0);
    executor->run(with_communication(scheme->schedule(2, steps)), slots, feed, RunMode::Train);
  }
  return {copy_weights(*stages[0]).at(0).flatten(), copy_weights(*stages[1]).at(0).flatten()};
}

void expect_near(const std::vector<at::Tensor>& w, const std::vector<float>& want, const char* what) {
  const at::Tensor got = at::cat(w);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(got[i].item<float>(), want[static_cast<size_t>(i)], 1e-6) << what << " weight " << i;
  }
}

TEST(DelayedMuon, TwoStagesAsO26) {
  const char* sync = "{type: gpipe, chunks: 1}";
  const char* delayed = "{type: pipedream_2bw, micro_batches: 1}";
  // Step 1: nothing is stale yet.
  EXPECT_TRUE(at::equal(at::cat(run(sync, 1)), at::cat(run(delayed, 1))));
  // Step 3, the oracle's torch float32 row (W0 then W1).
  expect_near(run(sync, 3), {0.331445336f, 0.201904297f, 0.869531274f, 0.340624988f}, "sync");
  expect_near(run(delayed, 3), {0.334570318f, 0.205755606f, 0.867773473f, 0.339453101f}, "2BW");
}

/// One stage y = w x, loss (y - t)^2 / 2, one sample per mini-batch: x_k = 1 + k / 2,
/// t_k = (-1)^k.
class Scalars : public Feed {
 public:
  at::Tensor input(int mb) override { return at::full({1, 1}, 1.0 + mb / 2.0, at::kDouble); }
  at::Tensor target(int mb) override { return at::full({1, 1}, mb % 2 ? -1.0 : 1.0, at::kDouble); }
  double loss_scale(int) override { return 1; }
  void on_result(int, const MicroBatchResult&) override {}
};

struct ScalarImpl : torch::nn::Module {
  ScalarImpl() { w = register_parameter("w", at::full({1, 1}, 0.5, at::kDouble)); }
  at::Tensor forward(const at::Tensor& x) { return at::matmul(x, w); }
  at::Tensor w;
};
TORCH_MODULE(Scalar);

double one_stage(const std::string& scheme_yaml, const std::string& optimizer_yaml, int steps) {
  const auto source = std::make_shared<ConfigSource>("t");
  auto scheme = Registry<Scheme>::get().create(ConfigNode(YAML::Load(scheme_yaml), source, "scheme"));
  auto optimizer = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(optimizer_yaml), source, "optimizer"));
  StageSpec spec;
  spec.blocks = {{"w", torch::nn::AnyModule(Scalar())}};
  spec.loss = std::make_shared<HalfSquaredError>();
  Stage stage(std::move(spec));
  stage.set_optimizer(optimizer->make(stage.parameters()));
  auto policy = scheme->make_policy(stage);
  std::vector<StageSlot> slots{{&stage, policy.get()}};
  Scalars feed;
  Registry<Executor>::get().create_default("sequential")->run(with_communication(scheme->schedule(1, steps)), slots,
                                                               feed, RunMode::Train);
  return copy_weights(stage).at(0).item<double>();
}

// pipelab's error-feedback form (docs/schemes.md, "Notation and optimizers" and docs/schemes.md, "Quirks"), by hand at
// D = 1 (2BW is still one step delayed there): g_k is taken at W_{k-1}, d_k = g_k for plain SGD, W_{k+1} = W_k - lr
// (d_k + c (d_k - d_{k-1})), d_{-1} = d_0. On plain SGD both places of the correction give the same
// weights.
TEST(DelayedMuon, ErrorFeedbackByHandOnOneStage) {
  const double lr = 0.1, c = 0.5;
  std::vector<double> w{0.5};  // W_0, W_1, ...
  double previous = 0;
  for (int k = 0; k < 5; ++k) {
    const double x = 1.0 + k / 2.0, t = k % 2 ? -1.0 : 1.0, at = w[static_cast<size_t>(std::max(k - 1, 0))];
    const double g = (at * x - t) * x;
    const double d = g + (k > 0 ? c * (g - previous) : 0.0);
    previous = g;
    w.push_back(w.back() - lr * d);
  }
  const std::string sgd = "{type: sgd, lr: 0.1}";
  const std::string base = "{type: pipedream_2bw, micro_batches: 1, error_feedback: 0.5";
  EXPECT_NEAR(one_stage(base + "}", sgd, 5), w.back(), 1e-12);
  EXPECT_NEAR(one_stage(base + ", error_feedback_on: gradient}", sgd, 5), w.back(), 1e-12);
  // Off by default: the plain delayed update.
  EXPECT_GT(std::abs(one_stage("{type: pipedream_2bw, micro_batches: 1}", sgd, 5) - w.back()), 1e-3);
  // With Muon's decoupled decay the correction leaves the decay alone: c = 0 changes nothing.
  const std::string muon = "{type: muon, lr: 0.1, weight_decay: 0.1}";
  EXPECT_EQ(one_stage(base.substr(0, base.find(", error")) + ", error_feedback: 0}", muon, 4),
            one_stage("{type: pipedream_2bw, micro_batches: 1}", muon, 4));
}

// The correction steps the live weights while micro-batches whose graphs saved them are in
// flight (4 stages of 1F1B, flush: never): it must leave autograd's version counters alone, as
// the optimizer does, or their backwards stop with "modified by an inplace operation".
TEST(DelayedMuon, ErrorFeedbackWithMicroBatchesInFlight) {
  const char* mlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 128, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4}
scheme:    {type: pipedream_2bw, micro_batches: 2, error_feedback: 1}
optimizer: {type: adamw, lr: 0.001}
run:       {epochs: 1, batch_size: 8, seed: 1, threads: 1}
)";
  for (const char* on : {"update", "gradient"}) {
    SCOPED_TRACE(on);
    TensorDict weights;
    EXPECT_NO_THROW(weights = testing::train(mlp, {std::string("scheme.error_feedback_on=") + on}));
    for (const auto& [name, t] : weights) EXPECT_TRUE(t.isfinite().all().item<bool>()) << name;
  }
  // The form of a correction that is off does nothing: refused at its key, not ignored.
  const std::string off = testing::user_error(
      [&] { testing::experiment(mlp, "", {"scheme.error_feedback=0", "scheme.error_feedback_on=gradient"}); });
  EXPECT_NE(off.find("scheme.error_feedback_on: error_feedback_on does nothing unless error_feedback > 0"),
            std::string::npos)
      << off;
}

}  // namespace
}  // namespace pipelab::delayed_muon_test
