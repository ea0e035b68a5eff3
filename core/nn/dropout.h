#pragma once
/// Dropout that draws its mask from the block's own generator (nn/context.h), so that a
/// recomputed forward replays the same mask and every executor sees the same masks.
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace pipelab::nn {

class DropoutImpl : public torch::nn::Cloneable<DropoutImpl> {
 public:
  explicit DropoutImpl(double p = 0.5);
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  double p() const { return p_; }

 private:
  double p_;
};
TORCH_MODULE(Dropout);

}  // namespace pipelab::nn
