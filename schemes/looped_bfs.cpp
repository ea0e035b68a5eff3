/// `looped_bfs`: the breadth-first looped schedule (Lamy-Poirier, "Breadth-First Pipeline
/// Parallelism", 2022; torch.distributed.pipelining's ScheduleLoopedBFS): each device runs
/// every forward of its first chunk, then of its next, then the backwards in reverse.
/// Synchronous weights (schemes/shared/sync_pipeline.h). Generator: schemes/schedules/interleaved.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

class LoopedBfs : public SyncPipeline<VirtualStagesOptions> {
 public:
  using SyncPipeline::SyncPipeline;
  std::vector<int> placement(int stages) const override {
    return schedules::looped_placement(devices_for(stages, options_.virtual_stages), options_.virtual_stages);
  }
  Schedule schedule(int stages, int units) const override {
    return schedules::looped_bfs(devices_for(stages, options_.virtual_stages), options_.virtual_stages, units);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, LoopedBfs, "looped_bfs", "breadth-first looped schedule over virtual_stages chunks per device");

}  // namespace pipelab
