#pragma once
/// A model's figures on a split, forward only: what each epoch's evaluation reports (the step
/// loop) and what `pipelab eval` recomputes from a finished run's weights.
#include <cmath>
#include <cstdint>

#include "core/data/loader.h"
#include "core/experiment/experiment.h"
#include "core/schedule/schedule.h"

namespace pipelab {

struct RunParts;

struct Evaluation {
  double loss = 0;  ///< per example, or per predicted token on ragged text
  double acc = 0;   ///< percent of the predictions
  double mcc = std::nan("");  ///< the Matthews correlation x 100 where the data's metric needs it
};

/// 100 x hits / count (0 for no count).
double percent_of(int64_t hits, int64_t count);

/// Replica 0's model (each replica holds the same weights) on every batch of `loader`, in
/// evaluation mode. `schedule` is the forward-only schedule over its batches, made on the
/// first call and kept for the next.
Evaluation evaluate_model(const Experiment& e, RunParts& parts, DataLoader& loader, Schedule& schedule);

}  // namespace pipelab
