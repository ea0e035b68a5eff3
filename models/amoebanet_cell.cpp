#include "models/amoebanet_cell.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "core/model/model.h"
#include "core/nn/batch_norm.h"
#include "core/util/error.h"
#include "models/blocks/conv_bn.h"

namespace pipelab::models {
namespace {

enum class Op { None, AvgPool3x3, MaxPool3x3, MaxPool2x2, Conv1x1, Conv3x3, Conv1x7_7x1 };

/// One operation of the genotype: the state it reads and what it applies.
struct Gene {
  int input;
  Op op;
};

// AmoebaNet-D's genotype as torchgpipe's genotype.py has it: node k (state k + 2) adds
// operations 2k and 2k+1. The normal cell concatenates states [0, 3, 4, 6], as TensorFlow's
// reference implementation does (the paper says [4, 5, 6]); torchgpipe notes that only this
// reproduces GPipe's Table 1 parameter counts.
const Gene kNormal[] = {{1, Op::Conv1x1},    {1, Op::MaxPool3x3},  {1, Op::None},       {0, Op::Conv1x7_7x1},
                        {0, Op::Conv1x1},    {0, Op::Conv1x7_7x1}, {2, Op::MaxPool3x3}, {2, Op::None},
                        {1, Op::AvgPool3x3}, {5, Op::Conv1x1}};
const std::vector<int> kNormalConcat{0, 3, 4, 6};
const Gene kReduction[] = {{0, Op::MaxPool2x2},  {0, Op::MaxPool3x3}, {2, Op::None}, {1, Op::Conv3x3},
                           {2, Op::Conv1x7_7x1}, {2, Op::MaxPool3x3}, {3, Op::None}, {1, Op::MaxPool2x2},
                           {2, Op::AvgPool3x3},  {3, Op::Conv1x1}};
const std::vector<int> kReductionConcat{4, 5, 6};

/// ReLU -> conv -> bn (torchgpipe's relu_conv_bn and the convs inside its operations).
Sequence relu_conv_bn(int64_t in, int64_t out, torch::ExpandingArray<2> kernel, torch::ExpandingArray<2> stride = 1,
                      torch::ExpandingArray<2> padding = 0) {
  return conv_bn(ConvBnOptions(in, out, kernel).stride(stride).padding(padding).order(Order::ActConvBn));
}

/// Halves the sides without losing the odd pixels: ReLU, then two 1x1/2 convs to out/2
/// channels each, one on x and one on x shifted by a pixel, concatenated, then bn.
class FactorizedReduceImpl : public torch::nn::Module {
 public:
  FactorizedReduceImpl(int64_t in, int64_t out) {
    PIPELAB_ASSERT(out % 2 == 0, "factorized reduction to {} channels", out);
    auto conv = [&] { return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out / 2, 1).stride(2).bias(false)); };
    conv1_ = register_module("conv1", conv());
    conv2_ = register_module("conv2", conv());
    bn_ = register_module("bn", nn::BatchNorm(out));
  }
  torch::Tensor forward(const torch::Tensor& input) {
    const torch::Tensor x = at::relu(input);
    using torch::indexing::Slice;
    const torch::Tensor shifted = at::constant_pad_nd(x.index({Slice(), Slice(), Slice(1), Slice(1)}), {0, 1, 0, 1}, 0);
    return bn_(at::cat({conv1_(x), conv2_(shifted)}, 1));
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  nn::BatchNorm bn_{nullptr};
};
TORCH_MODULE(FactorizedReduce);

torch::nn::AnyModule make_op(Op op, int64_t c, int64_t s, bool avg_pool_quirk) {
  using torch::nn::AnyModule;
  const int64_t q = c / 4;  // the bottleneck width of the 3x3 and 1x7/7x1 operations
  auto avg3 = [&] {
    return AnyModule(
        torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(3).stride(s).padding(1).count_include_pad(false)));
  };
  switch (op) {
    case Op::None:
      return s == 1 ? AnyModule(torch::nn::Identity()) : AnyModule(FactorizedReduce(c, c));
    case Op::AvgPool3x3:
      return avg3();
    case Op::MaxPool3x3:
      return avg_pool_quirk ? avg3()
                            : AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(s).padding(1)));
    case Op::MaxPool2x2:
      return AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(s)));
    case Op::Conv1x1:
      return AnyModule(relu_conv_bn(c, c, 1, s));
    case Op::Conv3x3: {
      Sequence seq;
      seq->add("conv1", relu_conv_bn(c, q, 1))
          .add("conv2", relu_conv_bn(q, q, 3, s, 1))
          .add("conv3", relu_conv_bn(q, c, 1));
      return AnyModule(seq);
    }
    case Op::Conv1x7_7x1: {
      const std::vector<int64_t> k17{1, 7}, k71{7, 1}, s1x{1, s}, sx1{s, 1}, p03{0, 3}, p30{3, 0};
      Sequence seq;
      seq->add("conv1", relu_conv_bn(c, q, 1))
          .add("conv2", relu_conv_bn(q, q, k17, s1x, p03))
          .add("conv3", relu_conv_bn(q, q, k71, sx1, p30))
          .add("conv4", relu_conv_bn(q, c, 1));
      return AnyModule(seq);
    }
  }
  PIPELAB_ASSERT(false, "unknown AmoebaNet operation");
  return {};
}

}  // namespace

CellState CellSpec::output() const {
  const auto& concat = reduction ? kReductionConcat : kNormalConcat;
  const int64_t f = reduction ? 2 : 1;
  return {channels * static_cast<int64_t>(concat.size()), s1.height / f, s1.width / f};
}

CellImpl::CellImpl(const CellSpec& spec) : spec_(spec) {
  const int64_t c = spec.channels;
  reduce1_ = torch::nn::AnyModule(relu_conv_bn(spec.s1.channels, c, 1));
  register_module("reduce1", reduce1_.ptr());
  if (spec.reduction_prev) {
    reduce2_ = torch::nn::AnyModule(FactorizedReduce(spec.s2.channels, c));
  } else if (spec.s2.channels != c) {
    reduce2_ = torch::nn::AnyModule(relu_conv_bn(spec.s2.channels, c, 1));
  }
  if (!reduce2_.is_empty()) register_module("reduce2", reduce2_.ptr());
  const Gene* genes = spec.reduction ? kReduction : kNormal;
  for (int i = 0; i < 10; ++i) {
    // Reduction cells halve the sides where an operation reads an input state.
    const int64_t stride = spec.reduction && genes[i].input < 2 ? 2 : 1;
    operations_.push_back(make_op(genes[i].op, c, stride, spec.avg_pool_quirk));
    inputs_.push_back(genes[i].input);
    register_module(fmt::format("op{}", i), operations_.back().ptr());
  }
  concat_ = spec.reduction ? kReductionConcat : kNormalConcat;
}

std::vector<torch::Tensor> CellImpl::forward(const torch::Tensor& s1, const torch::Tensor& s2) {
  std::vector<torch::Tensor> states{reduce1_.forward(s1), reduce2_.is_empty() ? s2 : reduce2_.forward(s2)};
  for (size_t i = 0; i < operations_.size(); i += 2) {
    states.push_back(operations_[i].forward(states[inputs_[i]]) + operations_[i + 1].forward(states[inputs_[i + 1]]));
  }
  std::vector<torch::Tensor> out;
  for (int i : concat_) out.push_back(states[i]);
  return {at::cat(out, 1), s1};
}

}  // namespace pipelab::models
