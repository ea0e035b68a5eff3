#pragma once
/// The work on its weights a stage's policy does beyond the compute, from the order of its
/// actions alone (a scheme's numerics depend only on that order; so does this work): what the
/// replay prices (Scheme::weight_work; docs/simulate.md, "Weight versions priced"). Counted
/// in two units: copies, each one pass over the stage's parameters at the stage's copy cost,
/// and predictions, each priced as one of the stage's updates (a prediction reads the
/// optimizer's state and the weights and writes a weight-sized result, as the update does:
/// measured on this CPU with LibTorch's kernels, SGD with momentum's prediction 1.4 updates,
/// Adam's 0.96).
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// One action's work on its stage's weights.
struct WeightWork {
  double copies = 0;       ///< passes copying the stage's parameters
  double predictions = 0;  ///< weights predicted from the optimizer's state
  WeightWork& operator+=(const WeightWork& o) {
    copies += o.copies;
    predictions += o.predictions;
    return *this;
  }
  bool operator==(const WeightWork& o) const { return copies == o.copies && predictions == o.predictions; }
};
using WeightWorks = std::vector<WeightWork>;

/// Copies WeightSwap makes around one action that reads another version: it saves the live
/// weights (1), writes the other version in (1) and puts the live ones back afterwards (1).
inline constexpr double kSwapCopies = 3;
/// An element-wise pass that reads two weight-sized tensors and writes one (w + c v, w - v),
/// in copies' time: 1.0 and 1.6 measured on this CPU (4M float32 elements, one thread).
inline constexpr double kAxpyCopies = 1;
inline constexpr double kDifferenceCopies = 1.5;
/// PredictionMeter's distance (core/weights/weights.h: both sides in float64, the squares
/// summed), in copies' time: 14 measured as above.
inline constexpr double kDistanceCopies = 14;

/// Every action's copies as work.
WeightWorks as_copies(const std::vector<double>& copies);

/// PipeDream's weight stashing (core/weights/stashed_weights.h, each backward reading its
/// forward's version): each update's new weights are stashed (1); a backward (B, or I) whose
/// forward ran before an update the stage has made since swaps that version in (3).
/// `actions`: one stage's actions in the order it runs them; per action, its work.
WeightWorks stash_copies(const std::vector<Action>& actions);

/// PipeDream-2BW's double buffer (schemes/pipedream_2bw.cpp): the older buffer takes the
/// weights before each update (1); a forward or backward of a micro-batch of mini-batch k
/// (micro-batch mb / `micro_batches`) reads W_max(k-1,0), swapped in (3) once the stage has
/// made update k.
WeightWorks double_buffer_copies(const std::vector<Action>& actions, int micro_batches);

/// Where a weight predictor (core/weights/weights.h, predict_weights) runs on a stage.
struct Predicting {
  int forward_steps = 0;   ///< updates ahead each forward predicts (0: it reads the live weights)
  int backward_steps = 0;  ///< the same for each backward (the action that takes the gradient)
  /// Nothing happens before the stage's first update (XPipe: no moments yet). Otherwise the
  /// prediction of a parameter without optimizer state is a copy of it (predict_weights), and
  /// it is still swapped in.
  bool from_first_update = false;
  /// Each forward's prediction kept for its micro-batch's backward and swapped in there
  /// (SpecTrain's version 2).
  bool stash_for_backward = false;
  /// PredictionMeter (core/weights/prediction_meter.h) runs: a forward's prediction opens a
  /// measurement when none is open (a copy of it and of the live weights), and the update
  /// that reaches its target closes it (a copy of the weights and two distances).
  bool measured = false;
};

/// One prediction swapped in (3) after `updates` updates of the stage: before the first,
/// predict_weights copies the weights (1) instead of predicting.
WeightWork predicted_swap(int updates);

/// A predictor's work: each predicting action predicts (or copies, before any update) and
/// swaps the result in (3); the meter's copies where it runs.
WeightWorks predicted_swaps(const std::vector<Action>& actions, const Predicting& p);

}  // namespace pipelab
