#include "core/nn/dropout.h"

#include <ATen/ATen.h>

#include "core/nn/context.h"
#include "core/util/error.h"

namespace pipelab::nn {

DropoutImpl::DropoutImpl(double p) : p_(p) {
  if (p < 0 || p >= 1) throw UserError(fmt::format("dropout probability must be in [0, 1), got {}", p));
}

torch::Tensor DropoutImpl::forward(const torch::Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  at::Tensor mask = at::empty_like(x);
  at::Generator* gen = current_generator();
  if (gen) {
    mask.bernoulli_(1 - p_, *gen);
  } else {
    mask.bernoulli_(1 - p_);
  }
  return x * mask.div_(1 - p_);
}

}  // namespace pipelab::nn
