#pragma once
/// Sequence segments: a training forward that computes one segment of each sequence of its
/// micro-batch rather than the whole of it (the schedule units of Seq1F1B, Sun et al. 2024,
/// and TeraPipe, Li et al. ICML'21; docs/schedules.md, "Sequence-level pipelines").
///
/// The executor scopes each such forward with the segment it computes (SegmentScope); a
/// model block that depends on the position of a token reads it here: the position
/// embedding its offset, causal attention the keys and values of the earlier segments of the
/// same sequences (SegmentCache). Outside a scope (every other scheme, evaluation) a forward
/// computes whole sequences and nothing here is touched.
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <vector>

namespace pipelab::nn {

/// Which part of its sequences a forward computes: segment `index` of `count`, tokens
/// [offset, offset + length) of `total`, of the micro-batch numbered `key` (the same for
/// every segment of one micro-batch within a schedule run).
struct SequenceSegment {
  int64_t key = -1;
  int index = 0, count = 1;
  int64_t offset = 0, length = 0, total = 0;
  bool active() const { return count > 1; }
  bool last() const { return index + 1 == count; }
};

/// The segment the current thread's forward computes; null outside a segmented forward.
const SequenceSegment* current_segment();

/// Makes `segment` current for its lifetime (nothing when it is null or not active).
class SegmentScope {
 public:
  explicit SegmentScope(const SequenceSegment* segment);
  ~SegmentScope();
  SegmentScope(const SegmentScope&) = delete;
  SegmentScope& operator=(const SegmentScope&) = delete;

 private:
  const SequenceSegment* previous_;
};

/// What one causal layer keeps of the earlier segments of each micro-batch in flight, and
/// how their gradients get back to them.
///
/// Segment j attends to its own keys and values and to those of segments 0..j-1. Those
/// earlier tensors enter segment j's graph as leaves (detached aliases, no copy), so segment
/// j's backward stops there and accumulates their gradients in the leaves; segment i's own
/// tensors carry a hook that adds its leaf's accumulated gradient when segment i's backward
/// reaches them. The schedule runs a micro-batch's backwards in reverse segment order on
/// every stage (the validator holds it to that), so by then every later segment has given
/// its share; the hook checks that it has (a wrong order would be a silently wrong gradient).
class SegmentCache {
 public:
  /// The layer's tensors for the current segment (`mine`, each with its graph; the sequence
  /// runs along `dim`) -> the same tensors for every segment so far, concatenated along
  /// `dim`, earlier segments first. Outside a segmented forward: `mine` unchanged.
  std::vector<at::Tensor> extend(const std::vector<at::Tensor>& mine, int64_t dim);
  /// Micro-batches whose later segments are still to come.
  size_t pending() const { return past_.size(); }

 private:
  /// A segment's tensor as later segments read it, and how many of them gave it a gradient.
  struct Kept {
    at::Tensor leaf;
    std::shared_ptr<int> arrived;
  };
  /// Per micro-batch key, per segment so far, per tensor.
  std::map<int64_t, std::vector<std::vector<Kept>>> past_;
};

}  // namespace pipelab::nn
