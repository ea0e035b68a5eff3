#include "models/blocks/conv_bn.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>

#include "core/nn/batch_norm.h"

namespace pipelab::models {
namespace {

void add_act(SequenceImpl& s, Act act) {
  switch (act) {
    case Act::None:
      break;
    // Not in place: checkpointed stages recompute forwards (docs/schemes.md, "Quirks").
    case Act::Relu:
      s.add("relu", torch::nn::ReLU());
      break;
    case Act::Relu6:
      s.add("relu6", torch::nn::ReLU6());
      break;
  }
}

}  // namespace

Sequence conv_bn(const ConvBnOptions& o) {
  Sequence s;
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(o.in(), o.out(), o.kernel())
                                    .stride(o.stride())
                                    .padding(o.padding())
                                    .groups(o.groups())
                                    .bias(o.bias()));
  auto bn = [&](int64_t features) {
    if (!o.batch_norm()) return;
    nn::BatchNormOptions bo;
    bo.features = features;
    bo.eps = o.eps();
    s->add("bn", nn::BatchNorm(bo));
  };
  switch (o.order()) {
    case Order::ConvBnAct:
      s->add("conv", conv);
      bn(o.out());
      add_act(*s, o.act());
      break;
    case Order::ActConvBn:
      add_act(*s, o.act());
      s->add("conv", conv);
      bn(o.out());
      break;
    case Order::BnActConv:
      bn(o.in());
      add_act(*s, o.act());
      s->add("conv", conv);
      break;
  }
  return s;
}

int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t padding) {
  const int64_t span = in + 2 * padding - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace pipelab::models
