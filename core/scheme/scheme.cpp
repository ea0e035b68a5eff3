#include "core/scheme/scheme.h"

namespace pipelab {

Message StagePolicy::head(Stage& stage, int mb) {
  PIPELAB_ASSERT(false, "stage {}: the schedule has an H action for micro-batch {}, but the scheme's policy has no head",
                 stage.index(), mb);
  return {};
}

}  // namespace pipelab
