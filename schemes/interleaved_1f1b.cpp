/// `interleaved_1f1b`: Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21, section 2.2): each
/// device holds `virtual_stages` model chunks, stage s on device s mod p, so the pipeline
/// fills in chunk-sized steps and the bubble shrinks to (p-1)/(v*m + p-1) of device time.
/// Synchronous weights (schemes/shared/sync_pipeline.h). Generator: schemes/schedules/interleaved.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

class Interleaved : public SyncPipeline<VirtualStagesOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  std::vector<int> placement(int stages) const override {
    return schedules::looped_placement(devices_for(stages, options_.virtual_stages), options_.virtual_stages);
  }
  Schedule schedule(int stages, int units) const override {
    return schedules::interleaved_1f1b(devices_for(stages, options_.virtual_stages), options_.virtual_stages, units);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, Interleaved, "interleaved_1f1b", "Megatron's interleaved 1F1B: virtual_stages model chunks per device, looped placement");

}  // namespace pipelab
