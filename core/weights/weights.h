#pragma once
/// Weight versions of one stage: copies, in-place swaps and predictions (docs/design.md,
/// "Weight policies"). Every write goes through `.data()`, which shares a parameter's
/// storage but not its autograd version counter: the graph of a micro-batch in flight reads
/// whatever values the parameters hold when its backward runs, which is exactly the
/// mixed-version semantics of docs/schemes.md, "Notation and optimizers" (and of PyTorch <= 1.4, docs/schemes.md,
/// "Quirks"). Batch-norm running statistics are buffers, not parameters, and are never versioned (docs/schemes.md,
/// "Quirks").
#include <ATen/Tensor.h>

#include <vector>

#include "core/optim/optimizer.h"
#include "core/stage/stage.h"

namespace pipelab {

/// Values of a stage's parameters, in Stage::parameters() order.
using Weights = std::vector<at::Tensor>;

/// Copies of the live parameter values.
Weights copy_weights(Stage& stage);
/// Writes `w` into the parameters' storage (no autograd version bump).
void write_weights(Stage& stage, const Weights& w);
/// sqrt(sum of squared elements) over all tensors of a - b.
double distance(const Weights& a, const Weights& b);
/// Divides the stage's gradients by `count` (> 1): the mean over the micro-batches whose
/// gradients one update accumulated (schemes that sum unscaled micro-batch losses).
void average_gradients(Stage& stage, int count);

/// Puts other weights into a stage's parameters for one action and the live ones back.
/// The live values wait in a buffer that is reused across swaps.
class WeightSwap {
 public:
  explicit WeightSwap(Stage& stage) : stage_(stage) {}
  /// Saves the live values, then writes `w` into the parameters.
  void swap_in(const Weights& w);
  /// Writes the live values back (no-op when nothing is swapped in).
  void restore();
  bool active() const { return active_; }

 private:
  Stage& stage_;
  Weights live_;
  bool active_ = false;
};

/// Predicted weights W - lr * steps * d, with d the optimizer's direction for `request`
/// (SpecTrain's and PipeOptim's predictions, docs/schemes.md, "spectrain version 1"-docs/schemes.md, "pipeoptim"). A
/// parameter without optimizer state keeps its value: there is no prediction before the first gradient
/// (docs/schemes.md, "Quirks"). `decay` > 0 adds the decoupled weight decay term to d (AdamW: d + lambda W,
/// docs/schemes.md, "pipeoptim").
Weights predict_weights(Stage& stage, double lr, double steps, const DirectionRequest& request, double decay = 0);

}  // namespace pipelab
