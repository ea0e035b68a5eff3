#include "core/train/segment_feed.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

SegmentFeed::SegmentFeed(Feed& inner, const SequenceSplit& split, int64_t length)
    : inner_(inner), k_(split.segments), length_(length), cuts_(split.cuts(length)) {}

at::Tensor SegmentFeed::cut(const at::Tensor& t, int unit) const {
  const size_t j = static_cast<size_t>(unit % k_);
  PIPELAB_ASSERT(t.dim() >= 2 && t.size(1) == length_, "a sequence segment cuts [N, {}] tensors, got {} dimensions",
                 length_, t.dim());
  return t.narrow(1, cuts_[j], cuts_[j + 1] - cuts_[j]);
}

double SegmentFeed::loss_scale(int unit) {
  const size_t j = static_cast<size_t>(unit % k_);
  return inner_.loss_scale(unit / k_) * static_cast<double>(cuts_[j + 1] - cuts_[j]) / static_cast<double>(length_);
}

void SegmentFeed::on_result(int unit, const MicroBatchResult& result) {
  MicroBatchResult r = result;
  if (unit % k_ != 0) r.count = 0;  // the micro-batch's examples counted with its first segment
  inner_.on_result(unit / k_, r);
}

nn::SequenceSegment SegmentFeed::segment(int unit) {
  const int j = unit % k_;
  const int64_t first = cuts_[static_cast<size_t>(j)];
  return {unit / k_, j, k_, first, cuts_[static_cast<size_t>(j) + 1] - first, length_};
}

}  // namespace pipelab
