#pragma once
/// The partition of a candidate searched on its own schedule (tools/plan/planner.h): a
/// per-block cost balance ignores that 1F1B's first stage holds more activations than its
/// last, that a V's first device holds the first and the last chunk, and that an embedding
/// or an output head costs memory more than time. Here a cut moves one block at a time, and
/// a move stays when the replayed step gets shorter within the memory cap.
#include <chrono>
#include <cstdint>

#include "tools/plan/planner.h"

namespace pipelab::plan {

struct CutSearch {
  const Experiment& e;
  const PlanSpace& space;
  const CostsOf& costs_of;
  const sim::SimOptions& options;
  std::chrono::steady_clock::time_point start;  ///< of the search: its time limit counts from here

  /// Improves `c`'s balance (steepest descent over one-block moves across each cut) while
  /// its step shortens; returns the replays made.
  int64_t improve(Candidate& c) const;
};

}  // namespace pipelab::plan
