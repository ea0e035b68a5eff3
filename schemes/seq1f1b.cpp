/// `seq1f1b`: Seq1F1B (Sun et al., "Seq1F1B: Efficient Sequence-Level Pipeline Parallelism for
/// Large Language Model Training", arXiv 2406.03488, NAACL 2025; code thunlp/Seq1F1B): 1F1B
/// over (micro-batch, sequence segment) units. Each micro-batch's sequences are cut into
/// `segments` k (core/scheme/sequence_split.h); stage r warms up (D-1-r) + (k-1) units (the
/// reference's `num_warmup_microbatches`), runs forwards in unit order and each micro-batch's
/// backwards in reverse segment order (a segment's keys and values get their gradients from
/// the later segments), and steps once per mini-batch. Synchronous: it equals `single` on the
/// whole sequences, and k = 1 is pipedream_flush. With `virtual_stages` v >= 2, its interleaved
/// form (Megatron's looped placement; schemes/schedules/interleaved.cpp). Stage r holds at most
/// D - r + k - 1 units, each about 1/k of a micro-batch's activations: (D - r + k - 1) / k
/// micro-batches' worth against 1F1B's D - r.
#include "core/schedule/generators.h"
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

struct Seq1f1bOptions {
  int chunks = 4;
  SegmentOptions segment;
  int virtual_stages = 1;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch (chunk semantics, as torchgpipe's chunks)", positive);
    segment.fields(v);
    v("virtual_stages", virtual_stages,
      "model stages per device (v); 1 = Seq1F1B, 2 or more = its interleaved form (partition.stages = devices x v, "
      "stage s on device s mod devices)",
      positive);
  }
};

class Seq1f1b : public SyncPipeline<Seq1f1bOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  SequenceSplit sequence_split() const override { return options_.segment.split(); }
  std::vector<int> placement(int stages) const override {
    if (options_.virtual_stages == 1) return Scheme::placement(stages);
    return schedules::looped_placement(devices_for(stages, options_.virtual_stages), options_.virtual_stages);
  }
  Schedule schedule(int stages, int micro_batches) const override {
    const int k = options_.segment.segments, v = options_.virtual_stages;
    if (v > 1) return schedules::interleaved_1f1b(devices_for(stages, v), v, micro_batches, k);
    return schedules::one_f_one_b_flushed(stages, micro_batches, k);
  }
  std::vector<int> max_in_flight(int stages) const override {
    if (options_.virtual_stages > 1) return {};
    std::vector<int> bound;
    for (int r = 0; r < stages; ++r) bound.push_back(stages - r + options_.segment.segments - 1);
    return bound;
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Seq1f1b, "seq1f1b",
                 "Seq1F1B: 1F1B over (micro-batch, sequence segment) units of a causal LM; virtual_stages for its "
                 "interleaved form");

}  // namespace pipelab
