#include "core/nn/context.h"

namespace pipelab::nn {
namespace {
thread_local bool t_recomputing = false;
thread_local at::Generator* t_generator = nullptr;
thread_local bool* t_drew = nullptr;
thread_local bool t_graphed = false;
}  // namespace

bool is_graphed() { return t_graphed; }

GraphedGuard::GraphedGuard(bool on) : previous_(t_graphed) { t_graphed = t_graphed || on; }
GraphedGuard::~GraphedGuard() { t_graphed = previous_; }

bool is_recomputing() { return t_recomputing; }

RecomputeGuard::RecomputeGuard() : previous_(t_recomputing) { t_recomputing = true; }
RecomputeGuard::~RecomputeGuard() { t_recomputing = previous_; }

at::Generator* current_generator() {
  if (t_drew) *t_drew = true;
  return t_generator;
}

GeneratorScope::GeneratorScope(at::Generator* gen, bool* drew) : previous_(t_generator), previous_drew_(t_drew) {
  t_generator = gen;
  t_drew = drew;
}
GeneratorScope::~GeneratorScope() {
  t_generator = previous_;
  t_drew = previous_drew_;
}

}  // namespace pipelab::nn
