#pragma once
/// The feed of a scheme that pipelines sequence segments (core/scheme/sequence_split.h):
/// unit u of the schedule is segment u % k of the inner feed's micro-batch u / k.
#include <vector>

#include "core/exec/executor.h"
#include "core/scheme/sequence_split.h"

namespace pipelab {

/// Cuts every micro-batch of `inner` into the split's segments along the sequence (dim 1 of
/// the inputs and the per-position targets), at the cuts of its own length (ragged text's
/// micro-batches differ in length). Segment j's mean loss is scaled by its part of the
/// micro-batch's tokens (of its predicted targets, for ragged text) on top of the
/// micro-batch's own factor, so the k losses add up to the micro-batch's mean over every
/// token, and so do their gradients (an exact split of the mean). A micro-batch's examples
/// count once (with its first segment); hits add up. The document layout stays whole: a
/// segment's attention reads its keys' documents too (core/nn/document_layout.h).
class SegmentFeed final : public Feed {
 public:
  /// At least one token per segment in every micro-batch.
  SegmentFeed(Feed& inner, const SequenceSplit& split);
  at::Tensor input(int unit) override { return cut(inner_.input(unit / k_), unit); }
  at::Tensor target(int unit) override { return cut(inner_.target(unit / k_), unit); }
  double loss_scale(int unit) override;
  void on_result(int unit, const MicroBatchResult& result) override;
  at::Tensor example_ids(int unit) override { return inner_.example_ids(unit / k_); }
  nn::SequenceSegment segment(int unit) override;
  at::Tensor documents(int unit) override { return inner_.documents(unit / k_); }

 private:
  std::vector<int64_t> cuts(int64_t length) const;
  at::Tensor cut(const at::Tensor& t, int unit) const;
  Feed& inner_;
  SequenceSplit split_;
  int k_;
};

}  // namespace pipelab
