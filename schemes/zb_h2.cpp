/// `zb_h2`: ZB-H2 (Qi et al., ICLR 2024, section 3.1): more warm-up forwards and W passes reordered
/// so that no device idles between its first and its last action, at the cost of more
/// micro-batches in flight than 1F1B. Synchronous weights (schemes/shared/sync_pipeline.h).
/// Generator: schemes/schedules/zero_bubble.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

class ZbH2 : public SyncPipeline<ChunksOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  Schedule schedule(int stages, int units) const override { return schedules::zb_h2(stages, units); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, ZbH2, "zb_h2", "zero-bubble ZB-H2: no bubble inside the pipeline, more micro-batches in flight");

}  // namespace pipelab
