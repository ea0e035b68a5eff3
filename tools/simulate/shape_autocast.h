#pragma once
/// Autocast for the blocks a profile measures on the meta device (docs/simulate.md, "Memory
/// from shapes"). LibTorch's autocast casts only tensors on its own device (a meta tensor is
/// never cast), so a profile from shapes would keep every activation in float32 while the run
/// keeps many in bfloat16 and some in float32: a language model's residual stream stays
/// float32 (the embedding is not cast and float32 + bfloat16 promotes), a loss runs in
/// float32, and every forward keeps a bfloat16 copy of the weights its matrix products read.
///
/// While a ShapeAutocast is alive, every operator on this thread passes through a dispatcher
/// fallback (the TESTING_ONLY_GenericMode key, which LibTorch registers nothing for, above
/// autograd as autocast's own keys are) that applies autocast's policy for the run's device
/// type, whatever the tensors' device: the operators PyTorch's autocast runs in the lower
/// precision get their floating inputs cast to it (a parameter's cast once per scope, as
/// autocast caches it), those it runs in float32 get theirs cast to float32, the rest run as
/// they are. The lists are PyTorch's (aten/src/ATen/autocast_mode.cpp, the CPU and CUDA
/// policies), the operators a model's layers call; an operator missing here runs uncast,
/// as it would under autocast if PyTorch did not list it.
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <memory>

namespace pipelab::sim {

/// The autocast a run's stages compute under: its dtype and the device type whose policy
/// applies (the run's devices: a cluster's GPUs, or this CPU).
struct AutocastSpec {
  at::ScalarType dtype = at::kBFloat16;
  c10::DeviceType device = c10::DeviceType::CPU;
};

class ShapeAutocast {
 public:
  /// Autocast to `dtype` (bfloat16, float16) with `device`'s policy (CPU or CUDA) until the
  /// end of the scope; nests like autocast's own scopes (the cast cache lives until the
  /// outermost ends).
  ShapeAutocast(at::ScalarType dtype, c10::DeviceType device);
  /// With `spec` (null: nothing, the blocks run in their own dtype).
  explicit ShapeAutocast(const AutocastSpec* spec);
  ~ShapeAutocast();
  ShapeAutocast(const ShapeAutocast&) = delete;
  ShapeAutocast& operator=(const ShapeAutocast&) = delete;

 private:
  void enter(at::ScalarType dtype, c10::DeviceType device);
  struct Saved;
  std::unique_ptr<Saved> saved_;  ///< null: not entered
};

}  // namespace pipelab::sim
