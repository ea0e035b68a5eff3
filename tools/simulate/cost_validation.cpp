#include "tools/simulate/cost_validation.h"

namespace pipelab::sim {

const char* cost_kind_name(CostKind kind) {
  switch (kind) {
    case CostKind::Measured: return "measured";
    case CostKind::Given: return "given";
    case CostKind::Timed: return "timed here";
    case CostKind::Calibrated: return "calibrated";
    case CostKind::Derived: return "derived";
  }
  return "derived";
}

std::string cost_validation(CostKind kind) {
  switch (kind) {
    case CostKind::Measured:
      return "a run's own costs replayed: steps -3.4% to -0.1% of the runs measured (docs/simulate.md, "
             "\"Validation\"), time to target -5.0% to +10.2% over ten schemes (docs/time-to-accuracy.md, rounds 7 "
             "and 8)";
    case CostKind::Given:
      return "costs given by hand: as good as their figures (not checked)";
    case CostKind::Timed:
      return "blocks timed here: time to target -16.4% to +9.2% of measured over ten schemes (docs/time-to-accuracy.md, "
             "rounds 7 and 8); plans' steps 0.81x to 1.49x their prediction, the median per model 0.98x to 1.31x "
             "(docs/plan.md, round H)";
    case CostKind::Calibrated:
      return "calibrated per operator class: on this project's CPU, each model left out of the fit within 19% of its "
             "measured step, five of seven within 11% (docs/simulate.md, \"Calibrated costs\"); not yet checked on a "
             "GPU";
    case CostKind::Derived:
      return "derived from a preset's rates per operator class (or one rate, --device-flops): a preset's single-GPU "
             "throughput against published CNN training, -48% to +44%, eleven of seventeen within 20% (docs/simulate.md, "
             "\"Presets against published single-GPU throughput\"); its ratios against torchgpipe's ResNet-101 table "
             "on P40s, -12% to +32% (docs/time-to-accuracy.md)";
  }
  return "";
}

}  // namespace pipelab::sim
