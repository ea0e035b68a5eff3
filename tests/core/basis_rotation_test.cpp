// `optimizer: {type: basis_rotation}` (docs/schemes.md, "Basis rotation"): against an
// independent float64 reference in Python (three shapes, both geometries, both sources, 12
// steps across two refreshes), as Adam in the reference code's order when the rotation is the
// identity (and as torch's AdamW where the two agree), resumed in the middle of a refresh
// period bit for bit, and its routing by parameter name.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "core/io/pt_file.h"
#include "core/optim/optimizer.h"
#include "tests/support/helpers.h"

namespace pipelab::basis_rotation_test {
namespace {

std::shared_ptr<const OptimizerFactory> factory(const std::string& yaml) {
  auto source = std::make_shared<ConfigSource>("opt.yaml");
  return Registry<OptimizerFactory>::get().create(ConfigNode(YAML::Load(yaml), source, "optimizer"));
}

void step(Optimizer& opt, at::Tensor& w, const at::Tensor& g) {
  w.mutable_grad() = g;
  opt.step();
  opt.zero_grad();
}

constexpr const char* kReference =
    "{{type: basis_rotation, lr: 0.01, betas: [0.9, 0.999], eps: 1.0e-8, weight_decay: 0.01, "
    "precondition_frequency: 5, rotation_geometry: {}, approx_source: \"{}\"}}";

TEST(BasisRotation, MatchesAnIndependentFloat64Reference) {
  testing::TempDir dir;
  const auto [rc, out] = testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/core/basis_rotation_reference.py " +
                                        dir.file("ref.pt") + " 2>&1");
  if (rc != 0) GTEST_SKIP() << "no torch in Python (tools/setup.sh installs it): " << out;
  const std::map<std::string, at::Tensor> ref = testing::load_tensor_map(dir.file("ref.pt"));
  int cases = 0;
  for (const auto& [name, w0] : ref) {
    if (name.size() < 3 || name.substr(name.size() - 3) != ".w0") continue;
    const std::string c = name.substr(0, name.size() - 3);
    const size_t first = c.find('_'), second = c.rfind('_');
    const std::string geometry = c.substr(first + 1, second - first - 1), source = c.substr(second + 1);
    at::Tensor w = w0.clone();
    auto opt = factory(fmt::format(kReference, geometry, source))->make({w});
    for (int k = 0; k < 12; ++k) {
      step(*opt, w, ref.at(fmt::format("{}.g{}", c, k)));
      const at::Tensor want = ref.at(fmt::format("{}.w{}", c, k + 1));
      const double off = (w - want).abs().max().item<double>();
      EXPECT_LE(off, 1e-12) << c << " step " << k + 1;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 3 * 2 * 2);
}

TEST(BasisRotation, TheIdentityRotationIsAdamInTheCodesOrder) {
  // Diagonal gradients with a descending diagonal: both covariances are diagonal and
  // descending, so every basis is the identity (eigh's ascending order flipped, and a QR of a
  // diagonal matrix) up to LAPACK's last bits, and the update is Adam as the reference code
  // orders it: eps added to sqrt(v) before the bias correction, the decay as W + (-lr wd) W.
  at::Tensor w = at::linspace(-1, 1, 16, at::kDouble).reshape({4, 4}), adam = w.clone();
  auto opt = factory("{type: basis_rotation, lr: 0.01, betas: [0.9, 0.999], precondition_frequency: 3}")->make({w});
  at::Tensor m = at::zeros_like(w), v = at::zeros_like(w);
  for (int t = 1; t <= 7; ++t) {
    const at::Tensor g = at::diag(at::tensor({4.0, 3.0, 2.0, 1.0}, at::kDouble) * (1.0 + 0.1 * t));
    step(*opt, w, g);
    m.mul_(0.9).add_(g, 0.1);
    v.mul_(0.999).add_(g.square(), 1 - 0.999);
    const double size = 0.01 * std::pow(1 - std::pow(0.999, t), 0.5) / (1 - std::pow(0.9, t));
    adam.add_(adam, -0.01 * 0.01);
    adam.add_(m / v.sqrt().add_(1e-8), -size);
    EXPECT_LT((w - adam).abs().max().item<double>(), 1e-15) << "step " << t;
    for (const auto& [name, q] : opt->state()) {
      if (name.find(".q_") == std::string::npos) continue;
      EXPECT_LT((q.abs() - at::eye(4, at::kDouble)).abs().max().item<double>(), 1e-15) << name << " step " << t;
    }
  }
  // torch's AdamW adds eps after the bias correction: the two agree to eps's share, at most
  // lr eps / sqrt(1 - beta2) = 3.2e-9 a step (the direction is m_hat over at least
  // sqrt(v_hat) ~ |g| >= 1 here), 2.2e-8 over seven steps.
  at::Tensor torch_w = adam.clone();
  auto adamw = factory("{type: adamw, lr: 0.01, betas: [0.9, 0.999], weight_decay: 0.01}")->make({torch_w});
  at::Tensor w2 = adam.clone();
  auto rotated = factory("{type: basis_rotation, lr: 0.01, betas: [0.9, 0.999]}")->make({w2});
  for (int t = 1; t <= 7; ++t) {
    const at::Tensor g = at::diag(at::tensor({4.0, 3.0, 2.0, 1.0}, at::kDouble) * (1.0 + 0.1 * t));
    step(*adamw, torch_w, g);
    step(*rotated, w2, g);
  }
  EXPECT_LT((w2 - torch_w).abs().max().item<double>(), 2.3e-8);
}

TEST(BasisRotation, ResumesInTheMiddleOfARefreshPeriodBitForBit) {
  for (const std::string& source : {"2nd", "1st"}) {
    for (const std::string& geometry : {"bi", "uni"}) {
      const auto f = factory(fmt::format(kReference, geometry, source));
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
      std::vector<at::Tensor> grads;
      for (int k = 0; k < 9; ++k) grads.push_back(at::randn({5, 3}, gen, at::kDouble));
      at::Tensor w = at::randn({5, 3}, gen, at::kDouble), resumed = w.clone();
      auto whole = f->make({w});
      for (const at::Tensor& g : grads) step(*whole, w, g);
      // Seven steps (two past the refresh at 5), saved, a new optimizer loads them, two more.
      auto first = f->make({resumed});
      for (int k = 0; k < 7; ++k) step(*first, resumed, grads[static_cast<size_t>(k)]);
      auto second = f->make({resumed});
      second->load_state(first->state());
      second->set_steps(first->steps());
      for (int k = 7; k < 9; ++k) step(*second, resumed, grads[static_cast<size_t>(k)]);
      EXPECT_TRUE(at::equal(w, resumed)) << source << " " << geometry;
    }
  }
}

TEST(BasisRotation, RotatesTheNamedMatricesAndHandsTheRestToItsFallback) {
  // The attention's and the MLP's matrices are rotated; the embedding table (a matrix too),
  // a norm and a bias go to the fallback, AdamW by default (the authors' driver's).
  std::vector<at::Tensor> params{at::randn({8, 4}), at::randn({4, 4}), at::randn({4, 4}), at::ones({4}),
                                 at::zeros({4})};
  const std::vector<std::string> names{"embeddings.table", "layer0.attention.q_linear.weight",
                                       "layer0.ff.0.weight", "layer0.ff_norm.weight", "layer0.ff.0.bias"};
  auto opt = factory("{type: basis_rotation}")->make_named(params, names);
  for (at::Tensor& p : params) p.mutable_grad() = at::ones_like(p);
  opt->step();
  std::set<std::string> keys;
  for (const auto& [name, t] : opt->state()) keys.insert(name);
  // Rotated: covariances and bases; the fallback's AdamW: its two moments.
  EXPECT_TRUE(keys.count("1.gg_left") && keys.count("1.q_left") && keys.count("2.q_right")) << fmt::format("{}", keys);
  EXPECT_TRUE(keys.count("0.exp_avg") && keys.count("3.exp_avg_sq") && keys.count("4.exp_avg"));
  EXPECT_FALSE(keys.count("0.q_left") || keys.count("3.gg_left"));
  // `rotate: ["*"]` rotates every matrix, the embedding table included.
  auto every = factory("{type: basis_rotation, rotate: [\"*\"]}")->make_named(params, names);
  for (at::Tensor& p : params) p.mutable_grad() = at::ones_like(p);
  every->step();
  keys.clear();
  for (const auto& [name, t] : every->state()) keys.insert(name);
  EXPECT_TRUE(keys.count("0.q_left"));
}

TEST(BasisRotation, BadOptionsAreClearErrorsAtTheirKeys) {
  const std::pair<const char*, const char*> cases[] = {
      {"{type: basis_rotation, precondition_frequency: 0}", "optimizer.precondition_frequency: must be a number in [1"},
      {"{type: basis_rotation, betas: [0.9, 1.0]}", "optimizer.betas: must be two numbers in [0, 1)"},
      {"{type: basis_rotation, rotation_geometry: tri}", "optimizer.rotation_geometry: 'tri' is not one of bi, uni"},
      {"{type: basis_rotation, approx_source: 3rd}", "optimizer.approx_source: '3rd' is not one of 2nd, 1st"},
      {"{type: basis_rotation, fallback: {type: basis_rotation}}",
       "optimizer.fallback: must be an optimizer other than basis_rotation"},
  };
  for (const auto& [yaml, want] : cases) {
    try {
      factory(yaml);
      ADD_FAILURE() << yaml << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pipelab::basis_rotation_test
