#pragma once
/// Ways to compose modules into one tensor-to-tensor module, shared by the vision models:
/// a chain (`Sequence`), a chain with a shortcut (`Residual`) and parallel branches joined
/// along channels (`Branches`). Every part is registered under a name, so parameters read
/// `<block>.<part>.<param>` as they would in a Python nn.Sequential built from an OrderedDict.
///
/// torch::nn::Sequential cannot be used for this: its forward is a template, so it cannot be
/// put into a torch::nn::AnyModule (what a model block is, core/model/model.h). These
/// containers have an ordinary forward(Tensor) and nest freely.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

namespace pipelab::models {

/// Named sub-modules applied one after another.
class SequenceImpl : public torch::nn::Module {
 public:
  /// Appends `module` (a module holder such as torch::nn::Conv2d, or another container)
  /// under `name`; returns *this so that calls chain.
  template <class M>
  SequenceImpl& add(const std::string& name, M module) {
    return add_any(name, torch::nn::AnyModule(std::move(module)));
  }
  /// Appends an already type-erased module.
  SequenceImpl& add_any(const std::string& name, torch::nn::AnyModule module);

  /// Applies the steps in order (the identity when there are none).
  torch::Tensor forward(torch::Tensor x);
  size_t size() const { return steps_.size(); }

 private:
  std::vector<torch::nn::AnyModule> steps_;
};
TORCH_MODULE(Sequence);

/// A residual unit: its steps (as in a Sequence) plus a shortcut, optionally followed by a
/// ReLU. ResNet's basic and bottleneck units end with the ReLU (He et al. 2016); MobileNetV2's
/// inverted residuals do not (the "linear bottleneck", Sandler et al. 2018).
class ResidualImpl : public SequenceImpl {
 public:
  explicit ResidualImpl(bool relu_after) : relu_after_(relu_after) {}
  /// Replaces the identity shortcut by `module` (e.g. a strided 1x1 conv + batch norm),
  /// registered as "shortcut".
  template <class M>
  ResidualImpl& shortcut(M module) {
    shortcut_ = torch::nn::AnyModule(std::move(module));
    register_module("shortcut", shortcut_.ptr());
    return *this;
  }
  /// steps(x) + shortcut(x), then ReLU if asked for.
  torch::Tensor forward(torch::Tensor x);

 private:
  bool relu_after_;
  torch::nn::AnyModule shortcut_;
};
TORCH_MODULE(Residual);

/// Parallel branches applied to the same input, their outputs concatenated along channels
/// (dim 1), then optional trailing steps (e.g. a max-pool after an inception module). Serves
/// GoogLeNet's and Inception-v3's mixed modules and DenseNet's layers (an identity branch
/// next to the new features).
class BranchesImpl : public torch::nn::Module {
 public:
  /// Adds a branch under `name`; branches are concatenated in the order they were added.
  template <class M>
  BranchesImpl& add(const std::string& name, M module) {
    branches_.emplace_back(std::move(module));
    register_module(name, branches_.back().ptr());
    return *this;
  }
  /// Appends a step applied after the concatenation.
  template <class M>
  BranchesImpl& then(const std::string& name, M module) {
    after_.emplace_back(std::move(module));
    register_module(name, after_.back().ptr());
    return *this;
  }
  /// cat([branch(x) for each branch], dim 1), then the trailing steps.
  torch::Tensor forward(torch::Tensor x);

 private:
  std::vector<torch::nn::AnyModule> branches_;
  std::vector<torch::nn::AnyModule> after_;
};
TORCH_MODULE(Branches);

}  // namespace pipelab::models
