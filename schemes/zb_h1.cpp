/// `zb_h1`: ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1): the
/// backward split into I (input gradient, on the critical path) and W (weight gradient,
/// moved into the bubbles); 1F1B's peak memory with a third of its bubble when F = I = W.
/// Synchronous weights (schemes/sync_pipeline.h). Generator: schemes/schedules/zero_bubble.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/sync_pipeline.h"

namespace pipelab {
namespace {

class ZbH1 : public SyncPipeline<ChunksOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  Schedule schedule(int stages, int units) const override { return schedules::zb_h1(stages, units); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, ZbH1, "zb_h1", "zero-bubble ZB-H1: backward split into I and W, 1F1B's memory, a third of its bubble");

}  // namespace pipelab
