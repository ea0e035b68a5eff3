#include "core/nn/forward_scope.h"

namespace pipelab::nn {

ForwardScope& forward_scope() {
  thread_local ForwardScope scope;
  return scope;
}

}  // namespace pipelab::nn
