/// `dualpipe_v`: DeepSeek-V3's DualPipe folded into a V (DeepSeek-AI 2024; torch's
/// ScheduleDualPipeV): two chunks per device in a V, forward and backward chunks of different
/// micro-batches paired so that one's communication can hide under the other's compute.
/// Synchronous weights (schemes/shared/sync_pipeline.h). Generator: schemes/schedules/dualpipe.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

class DualPipeV : public SyncPipeline<ChunksOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  std::vector<int> placement(int stages) const override { return schedules::v_placement(devices_for(stages, 2)); }
  Schedule schedule(int stages, int units) const override { return schedules::dualpipe_v(devices_for(stages, 2), units); }
};

}  // namespace

PIPELAB_REGISTER(Scheme, DualPipeV, "dualpipe_v", "DualPipe folded into a V (DeepSeek-V3; torch's ScheduleDualPipeV)");

}  // namespace pipelab
