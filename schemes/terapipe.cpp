/// `terapipe`: TeraPipe (Li et al., "TeraPipe: Token-Level Pipeline Parallelism for Training
/// Large-Scale Language Models", ICML 2021; code zhuohan123/terapipe): GPipe's fill-drain over
/// (micro-batch, token slice) units. Each micro-batch's sequences are cut into `segments`
/// (core/scheme/sequence_split.h); every stage runs the units' forwards in order, then their
/// backwards in exactly the reverse order (so each micro-batch's later slices first), then one
/// update. Synchronous: it equals `single` on the whole sequences, and one segment is GPipe
/// without recomputation. TeraPipe chooses its slices by dynamic programming over measured
/// latencies; `segmentation: equal_compute` gives every slice the same modelled cost, which is
/// what its programme aims for when the slices' count is fixed.
#include "core/schedule/generators.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

struct TerapipeOptions {
  int chunks = 1;
  SegmentOptions segment;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch (chunk semantics, as torchgpipe's chunks)", positive);
    segment.fields(v);
  }
};

class Terapipe : public SyncPipeline<TerapipeOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  SequenceSplit sequence_split() const override { return options_.segment.split(); }
  Schedule schedule(int stages, int micro_batches) const override {
    Schedule s = schedules::gpipe(stages, micro_batches * options_.segment.segments);
    s.set_segments(options_.segment.segments);
    return s;
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Terapipe, "terapipe",
                 "TeraPipe: GPipe's fill-drain over (micro-batch, token slice) units of a causal LM");

}  // namespace pipelab
