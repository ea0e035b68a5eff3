#pragma once
/// Optimizers behind one interface that also reports the current update direction, which
/// weight prediction (SpecTrain, PipeOptim) reads without re-implementing a step.
/// Formulas: docs/reference-schemes.md F1 (SGD) and F2 (Adam/AdamW), with today's torch
/// semantics (Adam's epsilon added after the bias-corrected square root).
#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/registry.h"

namespace pipelab {

/// Updates a fixed list of parameters from their .grad().
class Optimizer {
 public:
  Optimizer(std::vector<at::Tensor> params, double lr);
  virtual ~Optimizer() = default;

  /// One update of every parameter that has a gradient (under no-grad).
  void step();
  /// Drops the gradients (set to undefined, as torch's zero_grad(set_to_none=True)).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  /// Updates applied so far.
  int64_t steps() const { return steps_; }
  const std::vector<at::Tensor>& params() const { return params_; }

  /// The direction d of the latest update of parameter i, so that the update was
  /// W <- W - lr * d (momentum buffer v for SGD with momentum, the gradient for plain SGD,
  /// m_hat / (sqrt(u_hat) + eps) for Adam/AdamW without the decoupled decay).
  /// Undefined before the first update.
  virtual at::Tensor direction(size_t i) const = 0;
  /// The gradient (with L2 term, when coupled) that the latest update consumed.
  const at::Tensor& last_gradient(size_t i) const { return last_grad_.at(i); }

  /// Named state tensors for checkpoints ("<param index>.<name>").
  virtual std::vector<std::pair<std::string, at::Tensor>> state() const = 0;
  /// Restores what state() returned (names and shapes must match).
  virtual void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) = 0;
  void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  /// Applies one update to parameter i with gradient `grad`; returns the gradient consumed.
  virtual at::Tensor update(size_t i, at::Tensor& param, const at::Tensor& grad) = 0;

  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> last_grad_;
  double lr_;
  int64_t steps_ = 0;
};

/// A registered optimizer kind (`optimizer: {type: sgd, lr: 0.1, ...}`).
class OptimizerFactory : public Component {
 public:
  static constexpr const char* kKind = "optimizer";
  /// A new optimizer over `params`.
  virtual std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const = 0;
  /// The base learning rate, before the LR schedule.
  virtual double base_lr() const = 0;
};

/// Looks up "<i>.<name>" in a state list; throws UserError naming the checkpoint entry.
at::Tensor find_state(const std::vector<std::pair<std::string, at::Tensor>>& state, size_t i,
                      const std::string& name);

}  // namespace pipelab
