#pragma once
/// How good a weight prediction was, measured once the predicted version really exists:
///   error = ||W_hat - W_target|| / ||W_target - W_now||
/// (0 = perfect; 1 = no better than using the current weights). One measurement is open at
/// a time (two weight copies), started at the first forward after the previous one closed,
/// so the cost stays bounded on deep pipelines.
#include <optional>

#include "core/weights/weights.h"

namespace pipelab {

class PredictionMeter {
 public:
  /// Opens a measurement unless one is open: `predicted` claims to be the weights after
  /// version `target`; the stage's live weights are the baseline. No-op if target <= live
  /// or before the stage's first update.
  void start(Stage& stage, const Weights& predicted, int64_t target);
  /// Call after every update: the error once the stage has reached the target version.
  std::optional<double> check(Stage& stage);
  bool open() const { return target_ >= 0; }

 private:
  Weights predicted_, baseline_;
  int64_t target_ = -1;
};

}  // namespace pipelab
