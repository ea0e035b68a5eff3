#include "core/weights/prediction_meter.h"

namespace pipelab {

void PredictionMeter::start(Stage& stage, const Weights& predicted, int64_t target) {
  // Before the first update there is no prediction at all (docs/schemes.md, "Quirks"): nothing to measure.
  if (open() || target <= stage.optimizer().steps() || stage.optimizer().steps() == 0) return;
  predicted_.clear();
  for (const at::Tensor& t : predicted) predicted_.push_back(t.clone());
  baseline_ = copy_weights(stage);
  target_ = target;
}

std::optional<double> PredictionMeter::check(Stage& stage) {
  if (!open() || stage.optimizer().steps() < target_) return std::nullopt;
  const Weights actual = copy_weights(stage);
  const double moved = distance(actual, baseline_);
  const double error = moved > 0 ? distance(predicted_, actual) / moved : 0.0;
  target_ = -1;
  predicted_.clear();
  baseline_.clear();
  return error;
}

}  // namespace pipelab
