#include "core/nn/context.h"

#include "core/nn/forward_scope.h"

namespace pipelab::nn {

bool is_graphed() { return forward_scope().graphed; }

GraphedGuard::GraphedGuard(bool on) : previous_(forward_scope().graphed) { forward_scope().graphed = previous_ || on; }
GraphedGuard::~GraphedGuard() { forward_scope().graphed = previous_; }

bool is_recomputing() { return forward_scope().recomputing; }

RecomputeGuard::RecomputeGuard() : previous_(forward_scope().recomputing) { forward_scope().recomputing = true; }
RecomputeGuard::~RecomputeGuard() { forward_scope().recomputing = previous_; }

at::Generator* current_generator() {
  ForwardScope& s = forward_scope();
  if (s.drew) *s.drew = true;
  return s.generator;
}

GeneratorScope::GeneratorScope(at::Generator* gen, bool* drew)
    : previous_(forward_scope().generator), previous_drew_(forward_scope().drew) {
  forward_scope().generator = gen;
  forward_scope().drew = drew;
}
GeneratorScope::~GeneratorScope() {
  forward_scope().generator = previous_;
  forward_scope().drew = previous_drew_;
}

}  // namespace pipelab::nn
