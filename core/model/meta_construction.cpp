#include "core/model/meta_construction.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "core/model/meta_device.h"

namespace pipelab {
namespace {

constexpr c10::DispatchKey kKey = c10::DispatchKey::TESTING_ONLY_GenericWrapper;

/// Where the operator's `device` and `pin_memory` arguments sit, if it has them.
struct FactoryArgs {
  int device = -1;
  int pin_memory = -1;
};

FactoryArgs factory_args(const c10::FunctionSchema& schema) {
  FactoryArgs found;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name() == "device") found.device = static_cast<int>(i);
    if (args[i].name() == "pin_memory") found.pin_memory = static_cast<int>(i);
  }
  return found;
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const FactoryArgs where = factory_args(op.schema());
  if (where.device < 0) {
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kKey), stack);
    return;
  }
  const size_t n = op.schema().arguments().size();
  auto first = stack->end() - static_cast<std::ptrdiff_t>(n);
  c10::IValue& device = first[where.device];
  if (device.isNone() || (device.isDevice() && device.toDevice().is_cpu())) device = c10::IValue(c10::Device(c10::kMeta));
  if (where.pin_memory >= 0) first[where.pin_memory] = c10::IValue();
  // Called anew (not redispatched) so that BackendSelect reads the rewritten device; what the
  // operator creates inside takes its device from the rewritten arguments.
  c10::impl::ExcludeDispatchKeyGuard below(kKey);
  op.callBoxed(stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericWrapper, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

MetaConstruction::MetaConstruction() : included_(c10::impl::tls_is_dispatch_key_included(kKey)) {
  enable_meta_profiling();
  c10::impl::tls_set_dispatch_key_included(kKey, true);
}

MetaConstruction::~MetaConstruction() { c10::impl::tls_set_dispatch_key_included(kKey, included_); }

}  // namespace pipelab
