#include "core/feed/segment_feed.h"

#include <ATen/ATen.h>

#include "core/model/model.h"  // kIgnoredTarget
#include "core/util/error.h"

namespace pipelab {

SegmentFeed::SegmentFeed(Feed& inner, const SequenceSplit& split) : inner_(inner), split_(split), k_(split.segments) {}

std::vector<int64_t> SegmentFeed::cuts(int64_t length) const {
  PIPELAB_ASSERT(length >= k_, "{} segments of a micro-batch of {} tokens", k_, length);
  return split_.cuts(length);
}

at::Tensor SegmentFeed::cut(const at::Tensor& t, int unit) const {
  const size_t j = static_cast<size_t>(unit % k_);
  PIPELAB_ASSERT(t.dim() >= 2, "a sequence segment cuts [N, T] tensors, got {} dimensions", t.dim());
  const std::vector<int64_t> c = cuts(t.size(1));
  return t.narrow(1, c[j], c[j + 1] - c[j]);
}

double SegmentFeed::loss_scale(int unit) {
  const size_t j = static_cast<size_t>(unit % k_);
  const at::Tensor y = inner_.target(unit / k_);
  const std::vector<int64_t> c = cuts(y.size(1));
  const double scale = inner_.loss_scale(unit / k_);
  if (!inner_.documents(unit / k_).defined()) {
    return scale * static_cast<double>(c[j + 1] - c[j]) / static_cast<double>(y.size(1));
  }
  // Ragged text: the segment's part of the micro-batch's predicted targets.
  return scale * static_cast<double>(predicted_targets(y.narrow(1, c[j], c[j + 1] - c[j]))) /
         static_cast<double>(predicted_targets(y));
}

void SegmentFeed::on_result(int unit, const MicroBatchResult& result) {
  MicroBatchResult r = result;
  if (unit % k_ != 0) r.count = 0;  // the micro-batch's examples counted with its first segment
  inner_.on_result(unit / k_, r);
}

nn::SequenceSegment SegmentFeed::segment(int unit) {
  const int j = unit % k_;
  const int64_t length = inner_.target(unit / k_).size(1);
  const std::vector<int64_t> c = cuts(length);
  const int64_t first = c[static_cast<size_t>(j)];
  return {unit / k_, j, k_, first, c[static_cast<size_t>(j) + 1] - first, length};
}

}  // namespace pipelab
