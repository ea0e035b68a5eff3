#pragma once
/// How a scheme that pipelines sequence segments (Seq1F1B, TeraPipe; docs/schedules.md,
/// "Sequence-level pipelines") cuts each micro-batch's sequences: into `segments` units,
/// unit u of a schedule run being segment u % segments of micro-batch u / segments.
///
/// `equal_tokens` gives the segments lengths that differ by at most one token. Under causal
/// attention a later token attends to more keys, so equal lengths make later segments
/// slower; `equal_compute` equalises their work instead under the cost model
///   work(token t) = w + (t + 1),   t = 0, 1, ...
/// in units of one query's work on one key, w being the model's per-token work beside
/// attention (ModelFactory::segment_token_work: 2 d_model + ff for the transformer). The
/// cuts fall where the cumulative work w e + e (e + 1) / 2 of the first e tokens reaches
/// j / segments of the whole, rounded to the nearest token: Seq1F1B's computation-wise
/// partition, and TeraPipe's slicing with every slice held to one cost.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/fields.h"

namespace pipelab {

enum class Segmentation { EqualTokens, EqualCompute };

struct SequenceSplit {
  int segments = 1;
  Segmentation mode = Segmentation::EqualTokens;
  /// w above: set by the run plan from the model.
  double token_work = 0;

  bool active() const { return segments > 1; }
  /// The `segments + 1` cuts of a sequence of `total` tokens: segment j is [cuts[j], cuts[j+1]),
  /// none empty (total >= segments).
  std::vector<int64_t> cuts(int64_t total) const;
  /// The work of tokens [first, end) under the cost model above.
  double work(int64_t first, int64_t end) const;
};

/// The `segments` and `segmentation` options of a scheme that splits sequences.
struct SegmentOptions {
  int segments = 4;
  Segmentation segmentation = Segmentation::EqualCompute;
  template <class V>
  void fields(V& v) {
    v("segments", segments, "sequence segments per micro-batch (k): the schedule's units are (micro-batch, segment)",
      positive);
    v.choice("segmentation", segmentation,
             Choices<Segmentation>{{"equal_tokens", Segmentation::EqualTokens},
                                   {"equal_compute", Segmentation::EqualCompute}},
             "segment lengths: equal_tokens = as equal as whole tokens allow; equal_compute = equal work under "
             "causal attention (later segments shorter), as Seq1F1B's computation-wise partition");
  }
  SequenceSplit split() const { return {segments, segmentation, 0}; }
};

}  // namespace pipelab
