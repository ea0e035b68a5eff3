#pragma once
/// Convolution with batch norm and an activation, the unit every vision model here is made
/// of. The three orders cover the reference models: post-activation (ResNet, VGG-BN,
/// Inception-v3's BasicConv2d, MobileNetV2), ReLU first (AmoebaNet's relu_conv_bn in
/// torchgpipe's benchmarks) and pre-activation (DenseNet's BN-ReLU-Conv layers).
#include <torch/arg.h>
#include <torch/expanding_array.h>

#include "models/blocks/containers.h"

namespace pipelab::models {

/// The activation of a ConvBn.
enum class Act { None, Relu, Relu6 };

/// Where batch norm and the activation sit around the convolution.
enum class Order {
  ConvBnAct,  ///< conv -> bn -> act
  ActConvBn,  ///< act -> conv -> bn
  BnActConv,  ///< bn -> act -> conv
};

/// Options of conv_bn(), in the style of LibTorch's own options (TORCH_ARG setters chain).
struct ConvBnOptions {
  ConvBnOptions(int64_t in, int64_t out, torch::ExpandingArray<2> kernel) : in_(in), out_(out), kernel_(kernel) {}
  TORCH_ARG(int64_t, in);
  TORCH_ARG(int64_t, out);
  TORCH_ARG(torch::ExpandingArray<2>, kernel);
  TORCH_ARG(torch::ExpandingArray<2>, stride) = 1;
  TORCH_ARG(torch::ExpandingArray<2>, padding) = 0;
  TORCH_ARG(int64_t, groups) = 1;
  /// A conv bias next to batch norm is redundant, but VGG and the CIFAR GoogLeNet have one.
  TORCH_ARG(bool, bias) = false;
  TORCH_ARG(bool, batch_norm) = true;
  /// Batch-norm epsilon (Inception-v3 uses 1e-3).
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(Act, act) = Act::Relu;
  TORCH_ARG(Order, order) = Order::ConvBnAct;
};

/// A Sequence with steps "conv" (torch Conv2d), "bn" (pipelab's nn::BatchNorm, so GPipe can
/// defer its statistics) and "relu"/"relu6", in the options' order; absent parts are left out.
/// Callers may append further steps (e.g. a pool) to the returned Sequence.
Sequence conv_bn(const ConvBnOptions& o);

/// Output length of a convolution or pooling window along one axis (floor mode; 0 when the
/// window does not fit).
int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t padding);

}  // namespace pipelab::models
