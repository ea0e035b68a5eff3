// The shared building blocks of the vision models (models/blocks/).
#include <gtest/gtest.h>

#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>

#include "models/blocks/containers.h"
#include "models/blocks/conv_bn.h"
#include "models/blocks/init.h"
#include "models/blocks/vision.h"

namespace pipelab::models::blocks_test {
namespace {

std::vector<std::string> names(torch::nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.key());
  return out;
}

TEST(ZooBlocks, SequenceChainsNamedSteps) {
  torch::manual_seed(0);
  torch::nn::Linear a(3, 4), b(4, 2);
  Sequence s;
  s->add("a", a).add("b", b);
  EXPECT_EQ(names(*s), (std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"}));
  const torch::Tensor x = torch::randn({5, 3});
  EXPECT_TRUE(torch::allclose(s->forward(x), b(a(x))));
  // A Sequence is itself a step (what torch::nn::Sequential cannot be inside an AnyModule).
  Sequence outer;
  outer->add("inner", s);
  torch::nn::AnyModule any(outer);
  EXPECT_TRUE(torch::allclose(any.forward(x), b(a(x))));
  EXPECT_EQ(names(*outer).front(), "inner.a.weight");
}

TEST(ZooBlocks, ResidualAddsTheShortcutThenRelu) {
  torch::manual_seed(0);
  torch::nn::Linear f(3, 3), proj(3, 3);
  const torch::Tensor x = torch::randn({4, 3});
  Residual identity(true);
  identity->add("f", f);
  EXPECT_TRUE(torch::allclose(identity->forward(x), torch::relu(f(x) + x)));
  Residual projected(false);
  projected->add("f", f);
  projected->shortcut(proj);
  EXPECT_TRUE(torch::allclose(projected->forward(x), f(x) + proj(x)));
  EXPECT_EQ(names(*projected), (std::vector<std::string>{"f.weight", "f.bias", "shortcut.weight", "shortcut.bias"}));
}

TEST(ZooBlocks, BranchesConcatenateAlongChannelsThenApplyTrailingSteps) {
  Branches b;
  b->add("same", torch::nn::Identity()).add("doubled", torch::nn::Functional([](torch::Tensor t) { return 2 * t; }));
  b->then("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)));
  const torch::Tensor x = torch::arange(16.0).reshape({1, 1, 4, 4});
  const torch::Tensor y = b->forward(x);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 2, 2, 2}));
  // Max of each 2x2 window of 0..15: 5, 7, 13, 15; the doubled channel follows.
  EXPECT_TRUE(torch::equal(y.flatten(), torch::tensor({5.0f, 7.0f, 13.0f, 15.0f, 10.0f, 14.0f, 26.0f, 30.0f})));
}

TEST(ZooBlocks, ConvBnOrdersAndNames) {
  Sequence post = conv_bn(ConvBnOptions(3, 8, 3).padding(1));
  EXPECT_EQ(names(*post), (std::vector<std::string>{"conv.weight", "bn.weight", "bn.bias"}));
  // Pre-activation: the batch norm sees the input channels.
  Sequence pre = conv_bn(ConvBnOptions(3, 8, 1).order(Order::BnActConv));
  EXPECT_EQ(names(*pre), (std::vector<std::string>{"bn.weight", "bn.bias", "conv.weight"}));
  EXPECT_EQ(pre->named_parameters()["bn.weight"].size(0), 3);
  // ReLU first: negative inputs are zeroed before the conv, so the output is constant per
  // channel (conv(0) + bias = 0, then batch norm of a constant is its beta = 0).
  Sequence relu_first = conv_bn(ConvBnOptions(2, 4, 1).order(Order::ActConvBn));
  EXPECT_EQ(relu_first->forward(-torch::rand({3, 2, 5, 5}) - 0.1).abs().max().item<double>(), 0.0);
  // No batch norm, a bias, ReLU6.
  Sequence plain = conv_bn(ConvBnOptions(1, 1, 1).batch_norm(false).bias(true).act(Act::Relu6));
  {
    torch::NoGradGuard no_grad;
    plain->named_parameters()["conv.weight"].fill_(1);
    plain->named_parameters()["conv.bias"].fill_(0);
  }
  EXPECT_TRUE(torch::equal(plain->forward(torch::tensor({-1.0f, 3.0f, 9.0f}).reshape({3, 1, 1, 1})).flatten(),
                           torch::tensor({0.0f, 3.0f, 6.0f})));
  // Grouped (depthwise) convs and rectangular kernels.
  Sequence dw = conv_bn(ConvBnOptions(6, 6, 3).groups(6).padding(1));
  EXPECT_EQ(dw->named_parameters()["conv.weight"].sizes(), (std::vector<int64_t>{6, 1, 3, 3}));
  Sequence rect = conv_bn(ConvBnOptions(2, 2, std::vector<int64_t>{1, 7}).padding(std::vector<int64_t>{0, 3}));
  EXPECT_EQ(rect->forward(torch::randn({2, 2, 9, 9})).sizes(), (std::vector<int64_t>{2, 2, 9, 9}));
}

TEST(ZooBlocks, WindowOutput) {
  EXPECT_EQ(window_out(299, 3, 2, 0), 149);
  EXPECT_EQ(window_out(224, 7, 2, 3), 112);
  EXPECT_EQ(window_out(224, 3, 2, 1), 112);
  EXPECT_EQ(window_out(35, 3, 2, 0), 17);
  EXPECT_EQ(window_out(2, 3, 2, 0), 0);  // the window does not fit
  EXPECT_EQ(window_out(3, 3, 2, 0), 1);
}

TEST(ZooBlocks, ClassifierPoolsGloballyThenLinear) {
  torch::manual_seed(0);
  Sequence head = classifier(3, 2);
  const torch::Tensor x = torch::randn({4, 3, 5, 5});
  const auto p = head->named_parameters();
  const torch::Tensor expected = torch::addmm(p["fc.bias"], x.mean({2, 3}), p["fc.weight"].t());
  EXPECT_TRUE(torch::allclose(head->forward(x), expected, 1e-5, 1e-6));
  ClassifierOptions o;
  o.bn_relu = true;
  o.dropout = 0.2;
  EXPECT_EQ(names(*classifier(3, 2, o)), (std::vector<std::string>{"bn.weight", "bn.bias", "fc.weight", "fc.bias"}));
}

TEST(ZooBlocks, KaimingFanOutAndNormalInits) {
  torch::manual_seed(0);
  Sequence s = conv_bn(ConvBnOptions(64, 256, 3).bias(true));
  s->add("fc", torch::nn::Linear(512, 512));
  init_spectrain(*s);
  const auto p = s->named_parameters();
  // Kaiming normal, fan_out = 256 * 3 * 3, ReLU gain sqrt(2): std sqrt(2 / 2304) = 0.02946.
  EXPECT_NEAR(p["conv.weight"].std().item<double>(), std::sqrt(2.0 / 2304), 0.0003);
  EXPECT_EQ(p["conv.bias"].abs().max().item<double>(), 0.0);
  EXPECT_NEAR(p["fc.weight"].std().item<double>(), 0.01, 0.0001);
  EXPECT_EQ(p["fc.bias"].abs().max().item<double>(), 0.0);
  EXPECT_EQ(p["bn.weight"].min().item<double>(), 1.0);
}

TEST(ZooBlocks, TruncatedNormalStaysWithinTwoStd) {
  torch::manual_seed(0);
  torch::Tensor t = torch::empty({200000});
  truncated_normal_(t, 0.1);
  EXPECT_LE(t.abs().max().item<double>(), 0.2);
  // The standard deviation of N(0, 1) truncated at +-2: sqrt(1 - 2 * 2 phi(2) / (2 Phi(2) - 1)) = 0.8796.
  EXPECT_NEAR(t.std().item<double>(), 0.08796, 0.0005);
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.001);
  // Values near the bounds occur (the distribution is not squeezed): P(|x| > 1.9 std) = 1.2%.
  EXPECT_GT((t.abs() > 0.19).to(torch::kDouble).mean().item<double>(), 0.005);
}

}  // namespace
}  // namespace pipelab::models::blocks_test
