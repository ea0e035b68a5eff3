/// `v_half`, `v_min`: V-Half and V-Min (Qi, Wan, Amar, Lin, "Pipeline Parallelism with
/// Controllable Memory", arXiv:2405.15362; docs/schedules.md "Built-in schedules"): two stages
/// per device in a V with the backward split into I and W, a building block repeated and
/// squeezed greedily (its generation there) so that a device holds about half (V-Half:
/// (p+2)//2 full-stage micro-batches) or a third (V-Min: (p+4)//3) of 1F1B's activations, at
/// about half or two thirds of its bubble.
/// Synchronous weights (schemes/shared/sync_pipeline.h). Generator: schemes/schedules/v_shapes.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

template <bool Half>
class VShaped : public SyncPipeline<ChunksOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  std::vector<int> placement(int stages) const override { return schedules::v_placement(devices_for(stages, 2)); }
  Schedule schedule(int stages, int units) const override {
    return Half ? schedules::v_half(devices_for(stages, 2), units) : schedules::v_min(devices_for(stages, 2), units);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, VShaped<true>, "v_half",
                 "V-Half: two chunks per device in a V, I/W split, half of 1F1B's activation memory");
PIPELAB_REGISTER(Scheme, VShaped<false>, "v_min",
                 "V-Min: two chunks per device in a V, I/W split, a third of 1F1B's activation memory");

}  // namespace pipelab
