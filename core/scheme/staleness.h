#pragma once
/// Staleness instrumentation for asynchronous schemes (no existing framework reports it).
/// At a stage, the update produced by micro-batch j's backward is applied to the live
/// version L (updates done so far). The *forward gap* is L minus the version the forward's
/// weights stand for, the *backward gap* L minus the version the backward read. Predicted
/// weights stand for the version they target (a negative gap: ahead of the update).
/// Examples (docs/schemes.md, "Version differences per stage"): vanilla async w_r / 0; PipeDream w_r / w_r;
/// PipeDream + vertical sync D-1 / D-1; SpecTrain v1 -floor(r/2) / -floor(r/2).
#include <map>
#include <vector>

#include "core/scheme/scheme.h"

namespace pipelab {

class StalenessRecorder {
 public:
  /// The forward of `mb` used weights standing for `version`.
  void forward(int mb, int64_t version) { forward_[mb] = version; }
  /// The backward of `mb` reads weights standing for `version`; records both gaps at the
  /// stage's live version.
  void backward(const Stage& stage, int mb, int64_t version);
  /// Any other measurement at the stage's current step.
  void add(const Stage& stage, const std::string& name, double value);
  void collect(std::vector<StageMetric>& out);

 private:
  std::map<int, int64_t> forward_;
  std::vector<StageMetric> rows_;
};

}  // namespace pipelab
