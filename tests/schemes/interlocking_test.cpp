// Interlocking backprop against docs/schemes.md, "Interlocking, one step" (the repository tests' one-step
// tables), its equivalences (docs/schemes.md, "Equivalences"), its traffic, and the head grammar.
#include <gtest/gtest.h>

#include <torch/nn/module.h>

#include "core/schedule/validate.h"
#include "schemes/shared/interlocking_heads.h"
#include "tests/support/helpers.h"

namespace pipelab::interlocking_test {
namespace {

/// y = x * p (elementwise, p broadcast).
struct ElementwiseImpl : torch::nn::Module {
  explicit ElementwiseImpl(std::vector<double> values) {
    p = register_parameter("p", at::tensor(values, at::kDouble));
  }
  at::Tensor forward(const at::Tensor& x) { return x * p; }
  at::Tensor p;
};
TORCH_MODULE(Elementwise);

/// The true loss of docs/schemes.md, "Interlocking, one step": dl/dlogits = 0.1 for every logit.
class TenthOfSum : public Loss {
 public:
  at::Tensor compute(const at::Tensor& out, const at::Tensor&) const override { return out.sum() * 0.1; }
};

/// One SGD step (lr 1) of components with main nets `mains` and heads (1, 1) on input x,
/// target class 1; returns the main nets' parameters after the step.
std::vector<std::vector<double>> one_step(const std::string& scheme_yaml, const std::vector<std::vector<double>>& mains,
                                          const std::vector<double>& x) {
  auto source = std::make_shared<ConfigSource>("t");
  const auto scheme = Registry<Scheme>::get().create(ConfigNode(YAML::Load(scheme_yaml), source, "scheme"));
  const auto sgd = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load("{type: sgd, lr: 1}"), source, "o"));
  const int k = static_cast<int>(mains.size());
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<StagePolicy>> policies;
  std::vector<std::unique_ptr<GradientRoute>> routes;
  std::vector<StageSlot> slots;
  for (int r = 0; r < k; ++r) {
    StageSpec spec;
    spec.index = r;
    spec.count = k;
    spec.blocks = {{fmt::format("main{}", r), torch::nn::AnyModule(Elementwise(mains[static_cast<size_t>(r)]))}};
    if (r + 1 == k) spec.loss = std::make_shared<TenthOfSum>();
    stages.push_back(std::make_unique<Stage>(std::move(spec)));
    if (r + 1 < k) {
      stages.back()->set_head(fmt::format("head{}", r), torch::nn::AnyModule(Elementwise(std::vector<double>{1, 1})),
                              std::make_shared<CrossEntropyLoss>());
    }
    stages.back()->set_optimizer(sgd->make(stages.back()->parameters()));
    policies.push_back(scheme->make_policy(*stages.back()));
    routes.push_back(scheme->add_ons()->route(*stages.back()));
    slots.push_back({stages.back().get(), policies.back().get(), routes.back().get()});
  }
  struct OneExample : Feed {
    at::Tensor x;
    at::Tensor input(int) override { return x; }
    at::Tensor target(int) override { return at::ones({1}, at::kLong); }
    void on_result(int, const MicroBatchResult&) override {}
  } feed;
  feed.x = at::tensor(x, at::kDouble).reshape({1, -1});
  const Schedule s = scheme->schedule(k, 1);
  validate_schedule(s);
  Registry<Executor>::get().create_default("sequential")->run(s, slots, feed, RunMode::Train);
  std::vector<std::vector<double>> out;
  for (const auto& stage : stages) {
    const at::Tensor p = stage->block_parameters()[0];
    out.emplace_back(p.data_ptr<double>(), p.data_ptr<double>() + p.numel());
  }
  return out;
}

using Table = std::vector<std::vector<double>>;

void expect_table(const Table& got, const Table& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what;
    for (size_t j = 0; j < got[i].size(); ++j) EXPECT_NEAR(got[i][j], want[i][j], 1e-12) << what << " component " << i;
  }
}

TEST(Interlocking, OneStepTablesOfSection5_6) {
  const Table three{{2, 2}, {3, 3}, {4, 4}};
  expect_table(one_step("{type: interlocking, mode: global}", {{2}, {3}, {4}}, {1, 0}), {{0.8}, {2.2}, {3.4}}, "e2e");
  expect_table(one_step("{type: interlocking, mode: local}", three, {1, 1}), {{1.5, 2.5}, {2, 4}, {3.4, 3.4}}, "local");
  expect_table(one_step("{type: interlocking, mode: pairwise}", three, {1, 1}), {{0.5, 3.5}, {2.2, 2.2}, {3.4, 3.4}},
               "pairwise");
  expect_table(one_step("{type: interlocking, mode: pairwise_sum}", three, {1, 1}), {{0, 4}, {1.2, 3.2}, {3.4, 3.4}},
               "pairwise sum");
  expect_table(one_step("{type: interlocking, mode: pairwise_mean}", three, {1, 1}), {{1, 3}, {2.1, 3.1}, {3.4, 3.4}},
               "pairwise mean");
  // 3-wise: component 0 takes L_2; components 1, 2 and 3 take the true loss.
  expect_table(one_step("{type: interlocking, mode: nwise, distance: 2}", {{2, 2}, {3, 3}, {4, 4}, {5, 5}}, {1, 1}),
               {{-4, 8}, {-1, -1}, {1, 1}, {2.6, 2.6}}, "3-wise");
  // n-wise with d = 1 is pairwise.
  expect_table(one_step("{type: interlocking, mode: nwise, distance: 1}", three, {1, 1}),
               one_step("{type: interlocking, mode: pairwise}", three, {1, 1}), "1-wise");
}

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 160, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 2]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 2}
)";

TensorDict main_nets(const TensorDict& d) {
  TensorDict out;
  for (const auto& kv : d) {
    if (kv.first.rfind("head", 0) != 0) out.push_back(kv);
  }
  return out;
}

TEST(Interlocking, GlobalIsSingleDeviceTraining) {
  const TensorDict single = testing::train(kMlp);
  for (const char* k : {"2", "3", "4"}) {
    EXPECT_TRUE(testing::identical(single, testing::train(kMlp, {std::string("partition.stages=") + k,
                                                                "partition.balance=auto",
                                                                "scheme={type: interlocking, mode: global}"})))
        << k << " components";
  }
}

TEST(Interlocking, NwiseEquivalences) {
  const std::vector<std::string> f64{"run.dtype=float64"};
  const auto with = [&](const std::string& scheme) {
    std::vector<std::string> o = f64;
    o.push_back("scheme=" + scheme);
    return testing::train(kMlp, o);
  };
  EXPECT_TRUE(testing::identical(with("{type: interlocking, mode: nwise, distance: 1}"),
                                 with("{type: interlocking, mode: pairwise}")));
  // With d >= K - 1 every main net is trained by the true loss: end-to-end backprop.
  const TensorDict global = with("{type: interlocking, mode: global}");
  for (const char* d : {"3", "5"}) {
    EXPECT_LT(testing::max_difference(main_nets(with(std::string("{type: interlocking, mode: nwise, distance: ") + d + "}")),
                                      global),
              1e-12)
        << "d = " << d;
  }
  EXPECT_GT(testing::max_difference(main_nets(with("{type: interlocking, mode: nwise, distance: 2}")), global), 1e-6);
}

TEST(Interlocking, BackwardTrafficPerStep) {
  // Per step and edge: global and pairwise send one activation-sized gradient (16 x 24
  // floats), local nothing, 3-wise at most 2 (the last edge 1: the last component relays
  // nothing).
  const auto traffic = [&](const std::string& scheme) {
    testing::TempDir dir;
    Experiment e = testing::experiment(kMlp, dir.file("run"), {"run.epochs=1", "scheme=" + scheme});
    Runner runner(e, {false, true});
    const RunSummary s = runner.run();
    return std::make_pair(s.history.back().bytes_forward_per_step, s.history.back().bytes_backward_per_step);
  };
  const double activation = 16 * 24 * 4;
  EXPECT_EQ(traffic("{type: interlocking, mode: global}"), std::make_pair(3 * activation, 3 * activation));
  EXPECT_EQ(traffic("{type: interlocking, mode: pairwise}"), std::make_pair(3 * activation, 3 * activation));
  EXPECT_EQ(traffic("{type: interlocking, mode: local}").second, 0.0);
  EXPECT_EQ(traffic("{type: interlocking, mode: nwise, distance: 2}").second, 5 * activation);
}

TEST(Interlocking, HeadsFromTheGrammar) {
  const auto params = [](const std::string& spec, std::vector<int64_t> shape) {
    return count_parameters(*interlocking::build_head(spec, shape, 10).ptr());
  };
  // conv 64->128 (3x3, bias) + bn(128) + conv 128->64 + bn(64) + fc 64->10.
  EXPECT_EQ(params("conv128_bn_conv64_bn_gbpl_fc", {64, 8, 8}),
            (64 * 9 * 128 + 128) + 2 * 128 + (128 * 9 * 64 + 64) + 2 * 64 + (64 * 10 + 10));
  EXPECT_EQ(params("fc32_fc", {24}), (24 * 32 + 32) + (32 * 10 + 10));
  const auto error = [](const std::string& spec, std::vector<int64_t> shape) {
    return testing::user_error([&] { interlocking::build_head(spec, shape, 10); });
  };
  EXPECT_NE(error("conv128_relu_fc", {64, 8, 8}).find("'relu' in 'conv128_relu_fc' is not a known token"), std::string::npos);
  EXPECT_NE(error("conv128_gbpl", {64, 8, 8}).find("must end with fc"), std::string::npos);
  EXPECT_NE(error("conv16_fc", {24}).find("needs image outputs"), std::string::npos);
  EXPECT_NE(error("bn_fc", {24}).find("must follow a conv"), std::string::npos);
  // The head's parameters join the component's optimizer and checkpoint.
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("run"), {"run.epochs=1", "scheme={type: interlocking, heads: fc8_fc}"});
  Runner runner(e, {false, true});
  runner.run();
  const TensorDict state = load_tensor_dict(dir.file("run/checkpoints/final.pt"));
  EXPECT_EQ(std::count_if(state.begin(), state.end(), [](const auto& kv) { return kv.first.rfind("head", 0) == 0; }), 3 * 4);
}

}  // namespace
}  // namespace pipelab::interlocking_test
