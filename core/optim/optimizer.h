#pragma once
/// Optimizers behind one interface that also reports the current update direction, which
/// weight prediction (SpecTrain, PipeOptim) reads without re-implementing a step.
/// Formulas: docs/schemes.md, "Notation and optimizers" (SGD and Adam/AdamW), with today's torch
/// semantics (Adam's epsilon added after the bias-corrected square root).
#include <ATen/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/registry.h"

namespace pipelab {

/// Which update direction a weight predictor asks for (docs/schemes.md, "spectrain version 1", docs/schemes.md,
/// "pipeoptim").
struct DirectionRequest {
  enum class Kind {
    Buffer,        ///< v_t (SGD with momentum), g_t (plain SGD), m_hat/(sqrt(u_hat)+eps) (Adam)
    OneStepAhead,  ///< SGD: mu v_t + (1 - tau) G_t, the next step's buffer (SpecTrain v1 / PipeOptim code)
    MomentumOnly,  ///< SGD: mu v_t (SpecTrain v1 code's backward: gradients were zeroed in place)
  };
  Kind kind = Kind::Buffer;
  /// The gradient term includes the coupled L2 term lambda W (torch <= 1.4 left it in .grad,
  /// docs/schemes.md, "Quirks").
  bool gradient_with_l2 = false;
  /// Adam: use this epsilon instead of the optimizer's (PipeOptim's code hard-codes 1e-8,
  /// docs/schemes.md, "Quirks").
  std::optional<double> eps;
};

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
  /// m_hat / (sqrt(u_hat) + eps) for Adam/AdamW without the decoupled decay), or another
  /// direction a predictor asks for. Undefined before the first update (docs/schemes.md, "Quirks").
  at::Tensor direction(size_t i) const { return direction(i, {}); }
  virtual at::Tensor direction(size_t i, const DirectionRequest& request) const = 0;
  /// The raw gradient g the latest update consumed.
  const at::Tensor& last_gradient(size_t i) const { return last_grad_.at(i); }
  /// The gradient the latest update consumed after adding the coupled L2 term (G = g + lambda W).
  const at::Tensor& last_coupled_gradient(size_t i) const { return last_coupled_.at(i); }
  /// Both of them as named tensors ("<i>.last_gradient", "<i>.last_coupled_gradient"), and
  /// back: predictors read them, so a resumed run needs them to predict as the uninterrupted
  /// one does (torch's optimizers keep no such state; this is pipelab's own).
  std::vector<std::pair<std::string, at::Tensor>> last_gradients() const;
  void load_last_gradients(const std::vector<std::pair<std::string, at::Tensor>>& state);

  /// lambda of a decoupled weight decay (AdamW), 0 otherwise: a predictor may add it (docs/schemes.md, "pipeoptim").
  virtual double decoupled_decay() const { return 0; }
  /// The first-moment decay beta1 of an Adam-family optimizer (nullopt for others), and a way
  /// for a scheme to set it per stage (the Nesterov asynchronous scheme's adaptive momentum).
  virtual std::optional<double> beta1() const { return std::nullopt; }
  virtual void set_beta1(double /*beta1*/) {}
  /// SGD's hyperparameters (nullopt for other optimizers): Gap-Aware's penalty
  /// (core/weights/gap_aware.h) and predictors that simulate future steps read them.
  struct SgdSettings {
    double momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false;
  };
  virtual std::optional<SgdSettings> sgd_settings() const { return std::nullopt; }
  /// Switches SGD's Nesterov momentum per stage (a scheme may use it on some stages only);
  /// needs momentum > 0 and dampening 0. Other optimizers ignore it.
  virtual void set_nesterov(bool /*nesterov*/) {}
  /// Adam's hyperparameters (Adam and AdamW; nullopt for others): `weight_decay` is the L2
  /// lambda, applied to the gradient or, when `decoupled`, to the weights. The moments m and
  /// u are in state() ("exp_avg", "exp_avg_sq"), steps() is their step count t.
  struct AdamSettings {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    bool decoupled = false;
  };
  virtual std::optional<AdamSettings> adam_settings() const { return std::nullopt; }

  /// Named state tensors for checkpoints ("<param index>.<name>").
  virtual std::vector<std::pair<std::string, at::Tensor>> state() const = 0;
  /// Restores what state() returned (names and shapes must match).
  virtual void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) = 0;
  /// Sets the update count (a resume); an optimizer that hands parameters to another sets
  /// that one's too.
  virtual void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  /// Applies one update to `param` (parameter i's data) with gradient `grad`; returns the
  /// gradient consumed after any coupled L2 term.
  virtual at::Tensor update(size_t i, at::Tensor& param, const at::Tensor& grad) = 0;
  /// update() for parameters `index` at once (their data and gradients, same order); returns
  /// the consumed gradients. An optimizer whose update is a few elementwise operations
  /// overrides it with LibTorch's multi-tensor (_foreach) operations: on a GPU one launch
  /// updates many tensors, where one per tensor and operation made the update of a ResNet
  /// hundreds of launches (docs/gpu.md). On the CPU they are the per-tensor operations.
  virtual std::vector<at::Tensor> update_all(const std::vector<size_t>& index, std::vector<at::Tensor>& params,
                                             const std::vector<at::Tensor>& grads);

  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> last_grad_, last_coupled_;
  double lr_;
  int64_t steps_ = 0;
};

/// A registered optimizer kind (`optimizer: {type: sgd, lr: 0.1, ...}`).
/// What an optimizer keeps and computes for one parameter: what the simulator prices its
/// update by (tools/simulate/derive.h).
struct StepCost {
  double state_elements = 0;  ///< elements of state it keeps, each as wide as the parameter's
  /// FLOPs of one step's matrix products, periodic work spread over its period (basis
  /// rotation's rotations and refreshes); the element-wise passes are priced by their bytes.
  double flops = 0;
  /// Kernels a step launches for it beyond an element-wise optimizer's pass (each pays the
  /// device's launch cost), periodic ones spread over their period.
  double kernels = 0;
};

class OptimizerFactory : public Component {
 public:
  static constexpr const char* kKind = "optimizer";
  /// A new optimizer over `params`.
  virtual std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const = 0;
  /// The same for a stage's parameters with their names (Stage::parameter_names), which an
  /// optimizer that treats parameters by what they are reads (basis rotation rotates the
  /// attention's and the MLPs' matrices); by default the names are not read.
  virtual std::unique_ptr<Optimizer> make_named(std::vector<at::Tensor> params,
                                                const std::vector<std::string>& /*names*/) const {
    return make(std::move(params));
  }
  /// The base learning rate, before the LR schedule.
  virtual double base_lr() const = 0;
  /// What it keeps and computes for a parameter named `name` (as Stage::parameter_names names
  /// it) of `shape`. By default measured: as many copies of the parameter as one step on a
  /// vector leaves state of (SGD 0, with momentum 1, Adam 2), and no products.
  virtual StepCost step_cost(const std::string& name, const std::vector<int64_t>& shape) const;
};

/// Looks up "<i>.<name>" in a state list; throws UserError naming the checkpoint entry.
at::Tensor find_state(const std::vector<std::pair<std::string, at::Tensor>>& state, size_t i,
                      const std::string& name);

}  // namespace pipelab
