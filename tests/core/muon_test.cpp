// `optimizer: {type: muon}` against torch.optim.Muon run by the installed Python torch (bit
// for bit, float32, CPU: every adjust_lr, Nesterov on and off, eight shapes, four steps),
// against the Muon oracles of docs/schemes.md, "Notation and optimizers" (Newton-Schulz gains, a 2 x 2 case; three
// steps of a 1 x 1 weight), and its routing: what is not a matrix goes to `fallback`.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "core/io/pt_file.h"
#include "core/optim/optimizer.h"
#include "tests/support/helpers.h"

namespace pipelab::muon_test {
namespace {

std::unique_ptr<Optimizer> make(const std::string& yaml, std::vector<at::Tensor> params) {
  auto source = std::make_shared<ConfigSource>("opt.yaml");
  auto factory = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(yaml), source, "optimizer"));
  return factory->make(std::move(params));
}

/// One step of a weight w with gradient g.
void step(Optimizer& opt, at::Tensor& w, const at::Tensor& g) {
  w.mutable_grad() = g;
  opt.step();
  opt.zero_grad();
}

TEST(Muon, EqualsTorchOptimMuonBitForBit) {
  // One thread on both sides: a busy machine may give a threaded product fewer threads, and
  // another order of its sums.
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  struct Restore {
    int n;
    ~Restore() { at::set_num_threads(n); }
  } restore{threads};
  testing::TempDir dir;
  const auto [rc, out] = testing::shell("OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python3 " PIPELAB_SOURCE_DIR
                                        "/tests/core/muon_reference.py " +
                                        dir.file("muon.pt") + " 2>&1");
  if (rc != 0) GTEST_SKIP() << "no torch.optim.Muon in Python (tools/setup.sh installs torch): " << out;
  const std::map<std::string, at::Tensor> ref = testing::load_tensor_map(dir.file("muon.pt"));
  int cases = 0;
  for (const auto& [name, w0] : ref) {
    if (name.size() < 3 || name.substr(name.size() - 3) != ".w0") continue;
    const std::string c = name.substr(0, name.size() - 3);
    const bool nesterov = c.find("_nesterov") != std::string::npos;
    const std::string mode = c.substr(c.find('_') + 1, c.rfind('_') - c.find('_') - 1);
    at::Tensor w = w0.clone();
    auto opt = make(fmt::format("{{type: muon, lr: 0.02, weight_decay: 0.1, momentum: 0.95, nesterov: {}, "
                                "adjust_lr: {}}}",
                                nesterov, mode),
                    {w});
    for (int k = 0; k < 4; ++k) {
      step(*opt, w, ref.at(fmt::format("{}.g{}", c, k)));
      EXPECT_TRUE(at::equal(w, ref.at(fmt::format("{}.w{}", c, k + 1))))
          << c << " step " << k + 1 << ": largest difference "
          << (w - ref.at(fmt::format("{}.w{}", c, k + 1))).abs().max().item<double>();
    }
    const auto state = opt->state();
    ASSERT_EQ(state.size(), 1u) << c;
    EXPECT_EQ(state[0].first, "0.momentum_buffer");
    EXPECT_TRUE(at::equal(state[0].second, ref.at(c + ".buffer"))) << c;
    ++cases;
  }
  EXPECT_EQ(cases, 8 * 3 * 2);
}

TEST(Muon, NewtonSchulzGainsAndATwoByTwoAsO24) {
  // Momentum 0 and no decay: W1 = -rho NS_k(g), rho = 1 for a square weight.
  const std::vector<float> phi{0.6953125f, 1.1171875f, 0.72265625f, 1.0859375f, 0.6875f};
  for (int k = 1; k <= 5; ++k) {
    at::Tensor w = at::zeros({1, 1});
    auto opt = make(fmt::format("{{type: muon, lr: 1, weight_decay: 0, momentum: 0, nesterov: false, ns_steps: {}}}", k),
                    {w});
    step(*opt, w, at::ones({1, 1}));
    EXPECT_EQ(w.item<float>(), -phi[static_cast<size_t>(k - 1)]) << "k = " << k;
  }
  at::Tensor w = at::zeros({2, 2});
  auto opt = make("{type: muon, lr: 1, weight_decay: 0, momentum: 0, nesterov: false}", {w});
  step(*opt, w, at::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2}));
  const at::Tensor want = -at::tensor({-0.68359375f, 0.81640625f, 0.734375f, 0.2470703125f}).reshape({2, 2});
  EXPECT_TRUE(at::equal(w, want)) << w;
}

TEST(Muon, ThreeStepsOfAOneByOneWeightAsO25) {
  // W0 = 1, lr 0.1, lambda 0.1, mu 0.95, Nesterov; g = 0.5, -0.2, 0.1. Every update is
  // +0.6875 (u > 0 each time: the second step moves against its own gradient).
  at::Tensor w = at::ones({1, 1});
  auto opt = make("{type: muon, lr: 0.1, weight_decay: 0.1, momentum: 0.95}", {w});
  const std::vector<float> want{0x1.d7ae14p-1f, 0x1.afc36p-1f, 0x1.883edcp-1f};
  const std::vector<float> grads{0.5f, -0.2f, 0.1f};
  for (size_t k = 0; k < 3; ++k) {
    step(*opt, w, at::full({1, 1}, grads[k]));
    EXPECT_EQ(w.item<float>(), want[k]) << "step " << k + 1;
  }
}

TEST(Muon, WhatIsNotAMatrixGoesToTheFallback) {
  at::manual_seed(1);
  at::Tensor w = at::randn({3, 4}), bias = at::randn({3});
  at::Tensor alone = bias.clone();
  auto opt = make("{type: muon, lr: 0.02, fallback: {type: adamw, lr: 0.001, weight_decay: 0.01}}", {w, bias});
  auto adamw = make("{type: adamw, lr: 0.001, weight_decay: 0.01}", {alone});
  for (int k = 0; k < 3; ++k) {
    const at::Tensor g = at::randn({3});
    w.mutable_grad() = at::randn({3, 4});
    bias.mutable_grad() = g;
    alone.mutable_grad() = g.clone();
    // The schedule halves the lr: the fallback's follows in proportion.
    opt->set_lr(k == 2 ? 0.01 : 0.02);
    adamw->set_lr(k == 2 ? 0.0005 : 0.001);
    opt->step();
    adamw->step();
    opt->zero_grad();
    adamw->zero_grad();
    EXPECT_TRUE(at::equal(bias, alone)) << "step " << k;
  }
  // The checkpointed state names the stage's own parameter indices, and loads back.
  std::set<std::string> names;
  for (const auto& kv : opt->state()) names.insert(kv.first);
  EXPECT_EQ(names, (std::set<std::string>{"0.momentum_buffer", "1.exp_avg", "1.exp_avg_sq"}));
  at::Tensor w2 = w.clone(), b2 = bias.clone();
  auto resumed = make("{type: muon, lr: 0.01, fallback: {type: adamw, lr: 0.0005, weight_decay: 0.01}}", {w2, b2});
  resumed->load_state(opt->state());
  resumed->set_steps(opt->steps());
  opt->set_lr(0.01);
  for (Optimizer* o : {opt.get(), resumed.get()}) {
    o->params()[0].mutable_grad() = at::ones({3, 4});
    o->params()[1].mutable_grad() = at::ones({3});
    o->step();
  }
  EXPECT_TRUE(at::equal(w, w2));
  EXPECT_TRUE(at::equal(bias, b2));
}

// Muon acts on each matrix alone, so per-stage optimizers are one Muon (docs/schemes.md
// docs/schemes.md, "Notation and optimizers", after Muon's formulas): two stages of one micro-batch give single's bits,
// on either executor.
TEST(Muon, TwoStagesAreOneMuon) {
  const char* yaml = R"(
model:     {type: mlp, sizes: [12, 32, 32, 4], dropout: 0.0}
dataset:   {type: synthetic, samples: 96, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 1}
scheme:    {type: single}
optimizer: {type: muon, lr: 0.02, fallback: {type: adamw, lr: 0.001, weight_decay: 0.01}}
run:       {epochs: 2, batch_size: 16, seed: 2, threads: 1}
)";
  const TensorDict single = testing::train(yaml);
  for (const char* executor : {"sequential", "threaded"}) {
    const TensorDict two = testing::train(
        yaml, {"partition.stages=2", "scheme={type: gpipe, chunks: 1}", std::string("run.executor=") + executor});
    EXPECT_TRUE(testing::identical(single, two)) << executor;
  }
}

TEST(Muon, AParameterThatIsNotAMatrixWithoutAFallbackIsRefused) {
  const std::string message = testing::user_error([] { make("{type: muon, lr: 0.02}", {at::zeros({3, 4}), at::zeros({3})}); });
  EXPECT_NE(message.find("optimizer.fallback"), std::string::npos) << message;
  EXPECT_NE(message.find("shape 3"), std::string::npos) << message;
  EXPECT_NE(message.find("type: adamw"), std::string::npos) << message;
  EXPECT_NE(testing::user_error([] { make("{type: muon, adjust_lr: keller}", {at::zeros({2, 2})}); }).find("match_rms_adamw"),
            std::string::npos);
  EXPECT_NE(testing::user_error([] { make("{type: muon, ns_coefficients: [1, 2]}", {at::zeros({2, 2})}); }).find("three"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::muon_test
