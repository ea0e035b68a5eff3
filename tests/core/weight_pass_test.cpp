// The weight half of a split backward (core/stage/weight_pass.h): after I, W computes the
// gradients a whole backward would, bit for bit, starting where each weight's path leaves
// the inputs' path; a weight that meets that path twice, or one I never reaches, is walked
// for as before and still gets the whole backward's bits.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>

#include "core/stage/weight_pass.h"

namespace pipelab::weight_pass_test {
namespace {

using Net = std::function<at::Tensor(const at::Tensor& x, const std::vector<at::Tensor>& w)>;

std::vector<at::Tensor> weights(int n) {
  std::vector<at::Tensor> w;
  for (int i = 0; i < n; ++i) {
    w.push_back(at::randn({6, 6}, at::kDouble).set_requires_grad(true));
    w.push_back(at::randn({6}, at::kDouble).set_requires_grad(true));
  }
  return w;
}

struct Grads {
  at::Tensor dx;
  std::vector<at::Tensor> dw;
};

/// One backward, whole (split false) or as I then W (split true), from fresh leaves.
Grads backward(const Net& net, const std::vector<at::Tensor>& w0, bool split, size_t* split_count = nullptr) {
  std::vector<at::Tensor> w;
  for (const at::Tensor& t : w0) w.push_back(t.detach().clone().set_requires_grad(true));
  const at::Tensor x = at::sin(at::arange(18, at::kDouble).reshape({3, 6})).set_requires_grad(true);
  const at::Tensor y = net(x, w);
  const at::Tensor dy = at::cos(at::arange(static_cast<double>(y.numel()), at::kDouble)).reshape(y.sizes());
  Grads g;
  if (!split) {
    torch::autograd::backward({y}, {dy});
    g.dx = x.grad();
  } else {
    WeightPass pass({y}, {x}, w);
    if (split_count) *split_count = pass.split_parameters();
    g.dx = torch::autograd::grad({y}, {x}, {dy}, /*retain_graph=*/true)[0];
    for (const at::Tensor& t : w) EXPECT_FALSE(t.grad().defined()) << "I touched a weight";
    pass.run({y}, {dy});
  }
  for (const at::Tensor& t : w) g.dw.push_back(t.grad());
  return g;
}

void expect_bitwise(const Grads& a, const Grads& b) {
  EXPECT_TRUE(a.dx.equal(b.dx));
  ASSERT_EQ(a.dw.size(), b.dw.size());
  for (size_t i = 0; i < a.dw.size(); ++i) {
    ASSERT_EQ(a.dw[i].defined(), b.dw[i].defined()) << "weight " << i;
    if (a.dw[i].defined()) EXPECT_TRUE(a.dw[i].equal(b.dw[i])) << "weight " << i;
  }
}

TEST(WeightPass, AChainOfLinearsSplitsEveryWeightAndKeepsTheBits) {
  at::manual_seed(1);
  const std::vector<at::Tensor> w = weights(3);
  const Net net = [](const at::Tensor& x, const std::vector<at::Tensor>& p) {
    at::Tensor h = x;
    for (size_t i = 0; i < p.size(); i += 2) h = at::tanh(at::linear(h, p[i], p[i + 1]));
    return h;
  };
  size_t split = 0;
  expect_bitwise(backward(net, w, false), backward(net, w, true, &split));
  EXPECT_EQ(split, 6u);
}

TEST(WeightPass, AWeightUsedTwiceOnTheInputsPathIsWalkedForAndKeepsTheBits) {
  at::manual_seed(2);
  const std::vector<at::Tensor> w = weights(2);
  // p[0] is used by both layers: its path meets the inputs' path twice.
  const Net net = [](const at::Tensor& x, const std::vector<at::Tensor>& p) {
    const at::Tensor h = at::tanh(at::linear(x, p[0], p[1]));
    return at::linear(h, p[0], p[3]) * at::sum(p[2]);
  };
  size_t split = 0;
  expect_bitwise(backward(net, w, false), backward(net, w, true, &split));
  EXPECT_EQ(split, 3u);  // p[1], p[2], p[3]
}

TEST(WeightPass, AWeightOffTheInputsPathGetsItsGradient) {
  at::manual_seed(3);
  const std::vector<at::Tensor> w = weights(2);
  // p[2] reaches the output without meeting the inputs' path at all but for the sum.
  const Net net = [](const at::Tensor& x, const std::vector<at::Tensor>& p) {
    return at::linear(x, p[0], p[1]) + at::linear(at::ones({3, 6}, at::kDouble), p[2], p[3]);
  };
  expect_bitwise(backward(net, w, false), backward(net, w, true));
}

}  // namespace
}  // namespace pipelab::weight_pass_test
