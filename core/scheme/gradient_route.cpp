#include "core/scheme/gradient_route.h"

#include "core/util/error.h"

namespace pipelab {

Message GradientRoute::backward(Stage& stage, int mb, const std::vector<Message>& in) {
  return {stage.backward(mb, in.empty() ? Tensors() : in.front().values), {}, in.empty() ? -1 : in.front().tag};
}

Message GradientRoute::head(Stage& stage, int mb) {
  PIPELAB_ASSERT(false, "stage {}: the schedule has an H action for micro-batch {}, but the scheme's gradient route has no head",
                 stage.index(), mb);
  return {};
}

GradientRoute& GradientRoute::end_to_end() {
  // Stateless: one instance serves every stage and thread.
  static GradientRoute route;
  return route;
}

}  // namespace pipelab
