/// `zb_h1`: ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3.1): the
/// backward split into I (input gradient, on the critical path) and W (weight gradient,
/// moved into the bubbles); 1F1B's peak memory with a third of its bubble when F = I = W.
/// With `virtual_stages: v > 1` it is torch's ScheduleInterleavedZeroBubble (docs/schedules.md
/// "Built-in schedules"): v looped stages per device, stage s on device s mod p. Synchronous weights
/// (schemes/shared/sync_pipeline.h). Generators: schemes/schedules/zero_bubble.cpp.
#include "schemes/schedules/modern.h"
#include "schemes/shared/sync_pipeline.h"

namespace pipelab {
namespace {

/// `chunks`, and `virtual_stages` (1: the paper's ZB-H1).
struct ZbH1Options {
  int chunks = 8;
  int virtual_stages = 1;
  template <class V>
  void fields(V& v) {
    v("chunks", chunks, "micro-batches per mini-batch (chunk semantics, as torchgpipe's chunks)", positive);
    v("virtual_stages", virtual_stages,
      "model stages per device: 1 is ZB-H1; v > 1 is torch's ScheduleInterleavedZeroBubble (partition.stages = "
      "devices x v, stage s on device s mod devices; chunks a multiple of max(1, chunks / devices))",
      positive);
  }
};

class ZbH1 : public SyncPipeline<ZbH1Options> {
 public:
  using SyncPipeline::SyncPipeline;
  std::vector<int> placement(int stages) const override {
    return schedules::looped_placement(devices_for(stages, options_.virtual_stages), options_.virtual_stages);
  }
  Schedule schedule(int stages, int units) const override {
    if (options_.virtual_stages == 1) return schedules::zb_h1(stages, units);
    return schedules::interleaved_zero_bubble(devices_for(stages, options_.virtual_stages), options_.virtual_stages,
                                              units);
  }
};

}  // namespace

PIPELAB_REGISTER(Scheme, ZbH1, "zb_h1",
                 "zero-bubble ZB-H1: backward split into I and W, 1F1B's memory, a third of its bubble; with "
                 "virtual_stages, torch's interleaved zero bubble");

}  // namespace pipelab
