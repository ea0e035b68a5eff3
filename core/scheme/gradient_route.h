#pragma once
/// The gradient route of a scheme (docs/design.md, "The one idea"): what a stage's B and H
/// actions compute from what it received. Separate from the weight policy (which weights
/// those actions read, core/scheme/scheme.h) because the two vary independently: every
/// weight policy runs on end-to-end backprop, and interlocking backprop's local and pairwise
/// routes run on the latest weights.
#include <vector>

#include "core/comm/message.h"
#include "core/scheme/stage_metric.h"
#include "core/stage/stage.h"

namespace pipelab {

class GradientRoute {
 public:
  virtual ~GradientRoute() = default;
  /// B of `mb`, given the gradients its device received for it from the next stage, in the
  /// order of the schedule's RECV actions (none on the last stage). Returns the message for
  /// the previous stage (sent only if the schedule sends it). The default is end-to-end
  /// backprop. The split backward (I, then W) is always end-to-end: Stage::backward_input
  /// and Stage::backward_weight.
  virtual Message backward(Stage& stage, int mb, const std::vector<Message>& in);
  /// The H action: a stage's own auxiliary objective (interlocking backprop). Returns the
  /// message for the previous stage (sent only if the schedule has a SEND_H for it).
  virtual Message head(Stage& stage, int mb);
  /// Moves the measurements made since the last call into `out` (as StagePolicy::collect).
  virtual void collect(std::vector<StageMetric>& /*out*/) {}

  /// The end-to-end route, for stages whose scheme keeps the default.
  static GradientRoute& end_to_end();
};

}  // namespace pipelab
