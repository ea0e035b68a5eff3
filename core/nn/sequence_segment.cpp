#include "core/nn/sequence_segment.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "core/nn/forward_scope.h"
#include "core/util/error.h"

namespace pipelab::nn {

const SequenceSegment* current_segment() { return forward_scope().segment; }

SegmentScope::SegmentScope(const SequenceSegment* segment) : previous_(forward_scope().segment) {
  if (segment && segment->active()) forward_scope().segment = segment;
}
SegmentScope::~SegmentScope() { forward_scope().segment = previous_; }

std::vector<at::Tensor> SegmentCache::extend(const std::vector<at::Tensor>& mine, int64_t dim) {
  const SequenceSegment* segment = current_segment();
  if (!segment) return mine;
  std::vector<std::vector<Kept>>& earlier = past_[segment->key];
  // Segment 0 starts the micro-batch afresh (an interrupted run may have left one behind).
  if (segment->index == 0) earlier.clear();
  PIPELAB_ASSERT(static_cast<int>(earlier.size()) == segment->index,
                 "segment {} of micro-batch {} computed after {} of its segments (they run in order)", segment->index,
                 segment->key, earlier.size());
  const int later = segment->count - 1 - segment->index;
  std::vector<Kept> kept;
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : mine) {
    Kept k;
    if (later > 0 && at::GradMode::is_enabled() && t.requires_grad()) {
      k.leaf = t.detach().requires_grad_(true);
      k.arrived = std::make_shared<int>(0);
      k.leaf.register_hook([arrived = k.arrived](const at::Tensor&) { ++*arrived; });
      // Segment i's backward adds what the later segments gave its leaf (see the header).
      at::Tensor(t).register_hook([leaf = k.leaf, arrived = k.arrived, later, key = segment->key,
                                   index = segment->index](const at::Tensor& grad) -> at::Tensor {
        PIPELAB_ASSERT(*arrived == later,
                       "the backward of segment {} of micro-batch {} ran before {} of its {} later segments' "
                       "backwards: a schedule must run a micro-batch's segments backward in reverse order",
                       index, key, later - *arrived, later);
        const at::Tensor& from_later = leaf.grad();
        return from_later.defined() ? grad + from_later : grad;
      });
    } else if (later > 0) {
      k.leaf = t.detach();
    }
    std::vector<at::Tensor> parts;
    for (const std::vector<Kept>& e : earlier) parts.push_back(e.at(out.size()).leaf);
    parts.push_back(t);
    out.push_back(parts.size() == 1 ? t : at::cat(parts, dim));
    kept.push_back(std::move(k));
  }
  if (later == 0) {
    past_.erase(segment->key);
  } else {
    earlier.push_back(std::move(kept));
  }
  return out;
}

}  // namespace pipelab::nn
