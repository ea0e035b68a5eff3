// ShapeAutocast (tools/simulate/shape_autocast.h) applies autocast's policy to meta tensors,
// which LibTorch's autocast never casts: on the same operators it must give the dtypes
// LibTorch's own CPU autocast gives on CPU tensors, cast a parameter once per scope (as
// autocast's cache does), and follow CUDA's lists when the run is priced on GPUs.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/device/compat.h"
#include "core/model/meta_device.h"
#include "tools/simulate/shape_autocast.h"

namespace pipelab::shape_autocast_test {
namespace {

/// The dtypes a small language-model-like chain makes: a linear layer, a float32 residual
/// add, a layer norm, attention-like scores and their softmax, a loss.
std::vector<at::ScalarType> chain(const at::Device& device) {
  torch::manual_seed(0);
  torch::nn::Linear linear(16, 16);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({16}));
  if (device.is_meta()) {
    to_meta(*linear);
    to_meta(*norm);
  }
  const at::Tensor x = torch::zeros({4, 16}, torch::TensorOptions().device(device));
  const at::Tensor h = linear(x);
  const at::Tensor residual = x + h;
  const at::Tensor normed = norm(residual);
  const at::Tensor scores = torch::matmul(normed, normed.transpose(0, 1));
  const at::Tensor weights = torch::softmax(scores, -1);
  const at::Tensor loss =
      torch::nn::functional::cross_entropy(weights, torch::zeros({4}, torch::TensorOptions(torch::kLong).device(device)));
  return {h.scalar_type(), residual.scalar_type(), normed.scalar_type(), scores.scalar_type(), weights.scalar_type(),
          loss.scalar_type()};
}

TEST(ShapeAutocast, OnMetaTensorsItGivesTheDtypesCpuAutocastGives) {
  std::vector<at::ScalarType> real, shaped, plain;
  {
    device::AutocastScope amp(c10::DeviceType::CPU, at::kBFloat16);
    real = chain(at::kCPU);
  }
  {
    sim::ShapeAutocast amp(at::kBFloat16, c10::DeviceType::CPU);
    shaped = chain(at::kMeta);
  }
  plain = chain(at::kMeta);
  EXPECT_EQ(shaped, real);
  // The chain does exercise the policy: bfloat16 products, a float32 residual and loss.
  EXPECT_EQ(real[0], at::kBFloat16);
  EXPECT_EQ(real[1], at::kFloat);
  EXPECT_EQ(real[5], at::kFloat);
  EXPECT_EQ(plain, std::vector<at::ScalarType>(6, at::kFloat));  // nothing leaks past the scope
}

TEST(ShapeAutocast, CudasListsKeepNormsAndSoftmaxInFloat32) {
  sim::ShapeAutocast amp(at::kBFloat16, c10::DeviceType::CUDA);
  const std::vector<at::ScalarType> d = chain(at::kMeta);
  EXPECT_EQ(d[0], at::kBFloat16);  // linear
  EXPECT_EQ(d[2], at::kFloat);     // layer_norm: float32 on CUDA (unlisted on the CPU: its input's dtype)
  EXPECT_EQ(d[3], at::kBFloat16);  // matmul
  EXPECT_EQ(d[4], at::kFloat);     // softmax
}

TEST(ShapeAutocast, AParameterIsCastOncePerScope) {
  // A leaf that takes gradients, read directly by two products in one scope: autocast casts
  // it once and both keep that copy. (LibTorch's C++ Linear multiplies by weight.t(), a view,
  // which autocast casts at each product: ShapeAutocast sees the same calls.)
  const at::Tensor w = torch::zeros({8, 8}, torch::TensorOptions().device(at::kMeta)).requires_grad_(true);
  const at::Tensor x = torch::zeros({2, 8}, torch::TensorOptions().device(at::kMeta));
  const auto cast_node = [](const at::Tensor& y) {
    for (const auto& edge : y.grad_fn()->next_edges()) {
      if (edge.function && edge.function->name().find("ToCopy") != std::string::npos) return edge.function.get();
    }
    return static_cast<torch::autograd::Node*>(nullptr);
  };
  at::Tensor a, b, c;
  {
    sim::ShapeAutocast amp(at::kBFloat16, c10::DeviceType::CPU);
    a = torch::mm(x, w);
    b = torch::mm(x, w);
  }
  {
    sim::ShapeAutocast amp(at::kBFloat16, c10::DeviceType::CPU);
    c = torch::mm(x, w);
  }
  EXPECT_EQ(a.scalar_type(), at::kBFloat16);
  ASSERT_NE(cast_node(a), nullptr);
  EXPECT_EQ(cast_node(a), cast_node(b));
  EXPECT_NE(cast_node(a), cast_node(c));  // a new scope casts again, as each forward action does
}

}  // namespace
}  // namespace pipelab::shape_autocast_test
