#include "core/nn/context.h"

namespace pipelab::nn {
namespace {
thread_local bool t_recomputing = false;
thread_local at::Generator* t_generator = nullptr;
}  // namespace

bool is_recomputing() { return t_recomputing; }

RecomputeGuard::RecomputeGuard() : previous_(t_recomputing) { t_recomputing = true; }
RecomputeGuard::~RecomputeGuard() { t_recomputing = previous_; }

at::Generator* current_generator() { return t_generator; }

GeneratorScope::GeneratorScope(at::Generator* gen) : previous_(t_generator) { t_generator = gen; }
GeneratorScope::~GeneratorScope() { t_generator = previous_; }

}  // namespace pipelab::nn
