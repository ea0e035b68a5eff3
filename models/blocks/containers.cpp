#include "models/blocks/containers.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab::models {

SequenceImpl& SequenceImpl::add_any(const std::string& name, torch::nn::AnyModule module) {
  PIPELAB_ASSERT(!module.is_empty(), "empty module added to a Sequence as '{}'", name);
  register_module(name, module.ptr());
  steps_.push_back(std::move(module));
  return *this;
}

torch::Tensor SequenceImpl::forward(torch::Tensor x) {
  for (auto& step : steps_) x = step.forward(x);
  return x;
}

torch::Tensor ResidualImpl::forward(torch::Tensor x) {
  torch::Tensor identity = shortcut_.is_empty() ? x : shortcut_.forward(x);
  // Out of place: a checkpointed stage recomputes this forward, and in-place updates of
  // saved tensors cannot be replayed (docs/schemes.md, "Quirks").
  torch::Tensor out = SequenceImpl::forward(x) + identity;
  return relu_after_ ? at::relu(out) : out;
}

torch::Tensor BranchesImpl::forward(torch::Tensor x) {
  PIPELAB_ASSERT(!branches_.empty(), "Branches without branches");
  std::vector<torch::Tensor> outs;
  outs.reserve(branches_.size());
  for (auto& b : branches_) outs.push_back(b.forward(x));
  torch::Tensor y = outs.size() == 1 ? outs.front() : at::cat(outs, 1);
  for (auto& step : after_) y = step.forward(y);
  return y;
}

}  // namespace pipelab::models
