/// `zbv`: ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024; torch's
/// ScheduleZBVZeroBubble): two chunks per device in a V, so device 0 holds the first and the
/// last stage, with the backward split into I and W. Synchronous weights
/// (schemes/shared/sync_pipeline.h). Generator: schemes/schedules/zero_bubble.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

class Zbv : public SyncPipeline<ChunksOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  std::vector<int> placement(int stages) const override { return schedules::v_placement(devices_for(stages, 2)); }
  Schedule schedule(int stages, int units) const override { return schedules::zbv(devices_for(stages, 2), units); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Zbv, "zbv", "zero-bubble ZB-V: two chunks per device in a V, I/W split");

}  // namespace pipelab
