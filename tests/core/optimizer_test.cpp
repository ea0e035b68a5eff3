// Optimizers against values computed by hand from docs/schemes.md, "Notation and optimizers"'s SGD and Adam (scalar
// double arithmetic in the test, not the implementation), against LibTorch's own
// optimizers, and the LR schedules against their formulas.
#include <gtest/gtest.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "tests/support/helpers.h"

namespace pipelab::optimizer_test {
namespace {

std::unique_ptr<Optimizer> make(const std::string& yaml, at::Tensor p) {
  auto source = std::make_shared<ConfigSource>("opt.yaml");
  auto factory = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(yaml), source, "optimizer"));
  return factory->make({p});
}

/// Runs steps with the given raw gradients on a scalar parameter starting at 1.
std::vector<double> trajectory(const std::string& yaml, const std::vector<double>& grads,
                               std::vector<double>* directions = nullptr) {
  at::Tensor w = at::ones({1}, at::kDouble);
  auto opt = make(yaml, w);
  std::vector<double> out;
  for (double g : grads) {
    w.mutable_grad() = at::full({1}, g, at::kDouble);
    opt->step();
    opt->zero_grad();
    out.push_back(w.item<double>());
    if (directions) directions->push_back(opt->direction(0).item<double>());
  }
  return out;
}

TEST(Optimizer, SgdMomentumWeightDecayByHand) {
  // SGD (docs/schemes.md, "Notation and optimizers") with mu = 0.9, lambda = 0.1, lr = 0.5: G1 = 0.2 + 0.1 = 0.3, v1 =
  // 0.3, W1 = 0.85; G2 = -0.4 + 0.085 = -0.315, v2 = 0.27 - 0.315 = -0.045, W2 = 0.8725.
  std::vector<double> d;
  const auto w = trajectory("{type: sgd, lr: 0.5, momentum: 0.9, weight_decay: 0.1}", {0.2, -0.4}, &d);
  EXPECT_NEAR(w[0], 0.85, 1e-15);
  EXPECT_NEAR(w[1], 0.8725, 1e-15);
  EXPECT_NEAR(d[0], 0.3, 1e-15);
  EXPECT_NEAR(d[1], -0.045, 1e-15);
}

TEST(Optimizer, SgdDampeningNesterovPlain) {
  // Dampening 0.5: v2 = 0.27 + 0.5 * -0.315 = 0.1125, W2 = 0.85 - 0.05625.
  EXPECT_NEAR(trajectory("{type: sgd, lr: 0.5, momentum: 0.9, dampening: 0.5, weight_decay: 0.1}", {0.2, -0.4})[1],
              0.79375, 1e-15);
  // Nesterov: d1 = 0.3 + 0.27 = 0.57, W1 = 0.715; G2 = -0.4 + 0.0715 = -0.3285,
  // v2 = 0.27 - 0.3285 = -0.0585, d2 = -0.3285 - 0.05265, W2 = 0.715 + 0.5 * 0.38115.
  const auto n = trajectory("{type: sgd, lr: 0.5, momentum: 0.9, nesterov: true, weight_decay: 0.1}", {0.2, -0.4});
  EXPECT_NEAR(n[0], 0.715, 1e-15);
  EXPECT_NEAR(n[1], 0.905575, 1e-15);
  // Without momentum the direction is the gradient itself.
  std::vector<double> d;
  EXPECT_NEAR(trajectory("{type: sgd, lr: 0.5}", {0.2}, &d)[0], 0.9, 1e-15);
  EXPECT_NEAR(d[0], 0.2, 1e-15);
}

TEST(Optimizer, SgdUpdatesManyParametersAtOnceAsF1DoesEachAlone) {
  // Several tensors in one step (the multi-tensor path): one starts without a gradient, so
  // in step 2 its momentum buffer is new while the others' are not; SGD's formula per tensor here.
  for (const bool nesterov : {false, true}) {
    const double lr = 0.3, mu = 0.9, wd = 0.05, tau = nesterov ? 0.0 : 0.25;
    at::manual_seed(3);
    std::vector<at::Tensor> w{at::randn({3, 4}, at::kDouble), at::randn({5}, at::kDouble), at::randn({2, 2}, at::kDouble)};
    std::vector<at::Tensor> want, v(w.size());
    for (const at::Tensor& t : w) want.push_back(t.clone());
    auto source = std::make_shared<ConfigSource>("opt.yaml");
    const std::string yaml = fmt::format("{{type: sgd, lr: {}, momentum: {}, dampening: {}, weight_decay: {}, nesterov: {}}}",
                                         lr, mu, tau, wd, nesterov);
    auto opt = Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(yaml), source, "optimizer"))->make(w);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < w.size(); ++i) {
        if (step == 0 && i == 1) continue;  // no gradient yet
        const at::Tensor g = at::randn(w[i].sizes(), at::kDouble);
        w[i].mutable_grad() = g;
        const at::Tensor G = g + wd * want[i];
        v[i] = v[i].defined() ? mu * v[i] + (1 - tau) * G : G.clone();
        want[i] = want[i] - lr * (nesterov ? G + mu * v[i] : v[i]);
      }
      opt->step();
      opt->zero_grad();
      for (size_t i = 0; i < w.size(); ++i) {
        EXPECT_LT((w[i] - want[i]).abs().max().item<double>(), 1e-14) << "tensor " << i << ", step " << step;
      }
    }
  }
}

/// Adam (docs/schemes.md, "Notation and optimizers") in scalar arithmetic (torch semantics: eps after the
/// bias-corrected square root).
std::vector<double> adam_by_hand(const std::vector<double>& grads, double lr, double wd, bool decoupled) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  double w = 1, m = 0, u = 0;
  std::vector<double> out;
  for (size_t t = 1; t <= grads.size(); ++t) {
    double g = grads[t - 1];
    if (decoupled) {
      w *= 1 - lr * wd;
    } else {
      g += wd * w;
    }
    m = b1 * m + (1 - b1) * g;
    u = b2 * u + (1 - b2) * g * g;
    const double mhat = m / (1 - std::pow(b1, t)), uhat = u / (1 - std::pow(b2, t));
    w -= lr * mhat / (std::sqrt(uhat) + eps);
    out.push_back(w);
  }
  return out;
}

TEST(Optimizer, AdamAndAdamWByHand) {
  const std::vector<double> g{0.2, -0.4, 0.05};
  const auto adam = trajectory("{type: adam, lr: 0.1, weight_decay: 0.01}", g);
  const auto adamw = trajectory("{type: adamw, lr: 0.1, weight_decay: 0.01}", g);
  const auto adam_ref = adam_by_hand(g, 0.1, 0.01, false), adamw_ref = adam_by_hand(g, 0.1, 0.01, true);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(adam[i], adam_ref[i], 1e-14);
    EXPECT_NEAR(adamw[i], adamw_ref[i], 1e-14);
  }
  // Step 1 in closed form: m_hat = g, sqrt(u_hat) = |g|, so W1 = 1 - 0.1 g / (|g| + 1e-8).
  EXPECT_NEAR(trajectory("{type: adam, lr: 0.1}", {0.2})[0], 1 - 0.1 * 0.2 / (0.2 + 1e-8), 1e-15);
  EXPECT_NEAR(trajectory("{type: adamw, lr: 0.1, weight_decay: 0.01}", {0.2})[0],
              0.999 - 0.1 * 0.2 / (0.2 + 1e-8), 1e-15);
  // The direction is the bias-corrected ratio m_hat / (sqrt(u_hat) + eps).
  std::vector<double> d;
  trajectory("{type: adam, lr: 0.1}", {0.2}, &d);
  EXPECT_NEAR(d[0], 0.2 / (0.2 + 1e-8), 1e-15);
}

TEST(Optimizer, MatchesLibTorchOptimizers) {
  torch::manual_seed(3);
  const at::Tensor start = at::randn({5, 4}, at::kDouble);
  std::vector<at::Tensor> grads;
  for (int i = 0; i < 6; ++i) grads.push_back(at::randn({5, 4}, at::kDouble));
  const auto compare = [&](const std::string& yaml, torch::optim::Optimizer&& reference, at::Tensor& ref_param) {
    at::Tensor mine = start.clone();
    auto opt = make(yaml, mine);
    for (const at::Tensor& g : grads) {
      mine.mutable_grad() = g.clone();
      ref_param.mutable_grad() = g.clone();
      opt->step();
      reference.step();
    }
    EXPECT_LT((mine - ref_param).abs().max().item<double>(), 1e-14) << yaml;
  };
  {
    at::Tensor p = start.clone();
    compare("{type: sgd, lr: 0.1, momentum: 0.9, dampening: 0.1, weight_decay: 0.01}",
            torch::optim::SGD({p}, torch::optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01)), p);
  }
  {
    at::Tensor p = start.clone();
    compare("{type: sgd, lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}",
            torch::optim::SGD({p}, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01)), p);
  }
  {
    at::Tensor p = start.clone();
    compare("{type: adam, lr: 0.01, weight_decay: 0.01}",
            torch::optim::Adam({p}, torch::optim::AdamOptions(0.01).weight_decay(0.01)), p);
  }
  {
    at::Tensor p = start.clone();
    compare("{type: adamw, lr: 0.01, weight_decay: 0.01}",
            torch::optim::AdamW({p}, torch::optim::AdamWOptions(0.01).weight_decay(0.01)), p);
  }
}

TEST(Optimizer, NadamMatchesTorchAndTheOracle) {
  // The NAdam oracle of docs/schemes.md, "Numbered oracles" (torch's NAdam, docs/schemes.md, "nesterov_async"):
  // constant gradient 1 on W0 = 1, lr 0.1, betas (0.99, 0.999), psi 0.004; torch.optim.NAdam 2.15 in float64 gives the
  // same digits (its mu-product is float32, so 1e-8).
  const auto plain = trajectory("{type: nadam, lr: 0.1, betas: [0.99, 0.999]}", {1, 1});
  EXPECT_NEAR(plain[0], 0.89934403, 1e-8);
  EXPECT_NEAR(plain[1], 0.83134346, 1e-8);
  const auto decoupled =
      trajectory("{type: nadam, lr: 0.1, betas: [0.99, 0.999], weight_decay: 0.01, decoupled_weight_decay: true}", {1, 1});
  EXPECT_NEAR(decoupled[0], 0.89834403, 1e-8);
  EXPECT_NEAR(decoupled[1], 0.82944512, 1e-8);
  // Three steps of changing gradients on three weights, coupled and decoupled decay 0.1:
  // torch.optim.NAdam(lr=0.01, weight_decay=0.1) in float64 printed these.
  for (const bool decoupled_decay : {false, true}) {
    at::Tensor w = at::tensor({0.5, -1.0, 2.0}, at::kDouble);
    auto opt = make(fmt::format("{{type: nadam, lr: 0.01, weight_decay: 0.1, decoupled_weight_decay: {}}}", decoupled_decay), w);
    for (const std::vector<double>& g :
         std::vector<std::vector<double>>{{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.05}, {0.2, 0.2, -0.1}}) {
      w.mutable_grad() = at::tensor(g, at::kDouble);
      opt->step();
    }
    const std::vector<double> torch_result = decoupled_decay
                                                 ? std::vector<double>{0.49350077246099094, -1.000258041694995, 1.9839203825804623}
                                                 : std::vector<double>{0.49296112695228506, -0.9998316087781719, 1.981348923145053};
    for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(w[i].item<double>(), torch_result[static_cast<size_t>(i)], 1e-9) << i;
  }
  // The direction is what the step subtracted, over lr.
  at::Tensor w = at::ones({1}, at::kDouble);
  auto opt = make("{type: nadam, lr: 0.1, betas: [0.99, 0.999]}", w);
  w.mutable_grad() = at::ones({1}, at::kDouble);
  opt->step();
  EXPECT_NEAR(opt->direction(0).item<double>(), (1 - 0.89934403) / 0.1, 1e-7);
}

TEST(Optimizer, StateRoundTrip) {
  at::Tensor a = at::ones({3}, at::kDouble), b = at::ones({3}, at::kDouble);
  for (const char* yaml : {"{type: adam, lr: 0.1}", "{type: nadam, lr: 0.1}"}) {
    a.fill_(1);
    auto oa = make(yaml, a);
    a.mutable_grad() = at::full({3}, 0.5, at::kDouble);
    oa->step();
    auto ob = make(yaml, b);
    b.copy_(a);
    ob->load_state(oa->state());
    ob->set_steps(oa->steps());
    a.mutable_grad() = at::full({3}, -0.25, at::kDouble);
    b.mutable_grad() = at::full({3}, -0.25, at::kDouble);
    oa->step();
    ob->step();
    EXPECT_TRUE(at::equal(a, b)) << yaml;
  }
}

double lr_factor(const std::string& yaml, double epoch, int total = 4) {
  auto source = std::make_shared<ConfigSource>("lr.yaml");
  return Registry<LrSchedule>::get().create(ConfigNode(YAML::Load(yaml), source, "lr_schedule"))->factor(epoch, total);
}

TEST(LrSchedule, Formulas) {
  // SpecTrain's LR schedule (docs/schemes.md, "1F1B"): (1 - e/E)^2, e 0-based; the last epoch uses
  // 1/E^2.
  EXPECT_DOUBLE_EQ(lr_factor("{type: polynomial, power: 2}", 0), 1);
  EXPECT_DOUBLE_EQ(lr_factor("{type: polynomial, power: 2}", 1), 0.5625);
  EXPECT_DOUBLE_EQ(lr_factor("{type: polynomial, power: 2}", 3), 1.0 / 16);
  EXPECT_DOUBLE_EQ(lr_factor("{type: multistep, milestones: [2, 4]}", 1.99), 1);
  EXPECT_DOUBLE_EQ(lr_factor("{type: multistep, milestones: [2, 4]}", 2), 0.1);
  EXPECT_NEAR(lr_factor("{type: multistep, milestones: [2, 4], gamma: 0.5}", 4), 0.25, 1e-15);
  EXPECT_NEAR(lr_factor("{type: step, step_size: 3}", 5), 0.1, 1e-15);
  EXPECT_NEAR(lr_factor("{type: cosine}", 2), 0.5, 1e-15);
  EXPECT_NEAR(lr_factor("{type: cosine, min_factor: 0.2}", 4), 0.2, 1e-15);
  EXPECT_DOUBLE_EQ(lr_factor("{type: constant}", 3), 1);
  // Linear warm-up from 0.1 over 2 epochs, on top of the shape.
  EXPECT_NEAR(lr_factor("{type: constant, warmup_epochs: 2, warmup_start_factor: 0.1}", 1), 0.55, 1e-15);
  EXPECT_NEAR(lr_factor("{type: cosine, warmup_epochs: 2}", 0.5), 0.25 * 0.5 * (1 + std::cos(M_PI * 0.125)), 1e-15);
}

TEST(LrSchedule, Granularity) {
  auto source = std::make_shared<ConfigSource>("lr.yaml");
  const auto per_epoch = Registry<LrSchedule>::get().create(ConfigNode(YAML::Load("{type: cosine}"), source, "s"));
  const auto per_step =
      Registry<LrSchedule>::get().create(ConfigNode(YAML::Load("{type: cosine, granularity: step}"), source, "s"));
  // Step 15 of 10 per epoch: epoch 1 (per epoch) or 1.5 (per step) of 4.
  EXPECT_NEAR(per_epoch->factor_at_step(15, 10, 4), 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);
  EXPECT_NEAR(per_step->factor_at_step(15, 10, 4), 0.5 * (1 + std::cos(M_PI * 1.5 / 4)), 1e-15);
}

}  // namespace
}  // namespace pipelab::optimizer_test
