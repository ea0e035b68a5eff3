#pragma once
/// The weight copies a stage's actions make beyond their compute, from the order of its
/// actions alone (a scheme's numerics depend only on that order; so do its copies): what the
/// replay prices at a copy's cost (Scheme::weight_copies; docs/simulate.md, "Weight versions
/// priced"). A copy is one pass over the stage's parameters: WeightSwap (core/weights/
/// weights.h) saves the live weights (1), writes another version in (1) and puts the live
/// ones back afterwards (1): 3 for each action that reads a version other than the live one.
#include <vector>

#include "core/schedule/schedule.h"

namespace pipelab {

/// Copies WeightSwap makes around one action that reads another version.
inline constexpr double kSwapCopies = 3;

/// PipeDream's weight stashing (core/weights/stashed_weights.h, each backward reading its
/// forward's version): each update's new weights are stashed (1); a backward (B, or I) whose
/// forward ran before an update the stage has made since swaps that version in (3).
/// `actions`: one stage's actions in the order it runs them; per action, its copies.
std::vector<double> stash_copies(const std::vector<Action>& actions);

/// PipeDream-2BW's double buffer (schemes/pipedream_2bw.cpp): the older buffer takes the
/// weights before each update (1); a forward or backward of a micro-batch of mini-batch k
/// (micro-batch mb / `micro_batches`) reads W_max(k-1,0), swapped in (3) once the stage has
/// made update k.
std::vector<double> double_buffer_copies(const std::vector<Action>& actions, int micro_batches);

}  // namespace pipelab
