#pragma once
/// What autograd saved for one micro-batch's backward, held where pipelab can move it: the
/// memory half of the OFFLOAD and RELOAD actions (docs/schedules.md, "Offloading
/// activations"; PipeOffload, Wan et al. 2025).
///
/// The activations a backward reads are not in the stage's hands: they are the
/// SavedVariables inside the graph's nodes. LibTorch's one seam for them is a pack/unpack
/// hook pair per SavedVariable, asked of the autograd engine when the variable is saved
/// (Engine::get_default_saved_variable_hooks, the hook Python's
/// torch.autograd.graph.saved_tensors_hooks and save_on_cpu use). pipelab installs an
/// engine that answers with hooks while a PackScope is open on the thread, and with none
/// otherwise: a forward that is not offloaded saves its tensors exactly as stock LibTorch
/// does, version checks included.
///
/// Offloading moves a storage only when the saved tensors are its sole holders: so a
/// parameter (and a view of one, as a saved `weight.t()`), a buffer, the stage's kept input
/// and output, and the message another stage reads are never moved, and memory is freed
/// exactly when moving frees it. Each storage is copied whole, byte for byte, and the saved
/// tensors are rebuilt on the copy with their offsets, sizes and strides: the backward reads
/// the same values through the same kernels, so its numbers are bitwise those of a run
/// without offload (tests/exec/offload_test.cpp).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device/host_copy.h"

namespace pipelab {

class SavedTensors {
 public:
  struct Entry;

  /// While alive, what autograd saves on this thread is packed into `into` (nests;
  /// restores the outer scope). Installs pipelab's engine on first use.
  class PackScope {
   public:
    explicit PackScope(SavedTensors* into);
    ~PackScope();
    PackScope(const PackScope&) = delete;
    PackScope& operator=(const PackScope&) = delete;

   private:
    SavedTensors* previous_;
  };

  /// Moves the storages only these saved tensors hold from `device` to host memory; returns
  /// the bytes moved (0 when everything is held elsewhere, or already away).
  int64_t offload(const c10::Device& device);
  /// Brings what offload() moved back to `device`; returns the bytes.
  int64_t reload(const c10::Device& device);
  /// Checks that nothing is still on the host, and makes the current stream of `device`
  /// wait until the reload's copies have ended (CUDA): call before the backward of stage
  /// `stage`'s micro-batch `mb` reads the tensors.
  void before_backward(const c10::Device& device, int stage, int mb);

  /// A tensor being saved now, for its hooks to hold (the engine's hooks call this).
  std::shared_ptr<Entry> track();

 private:
  /// One storage moved: its saved tensors, and its bytes on the host.
  struct Moved {
    std::vector<std::weak_ptr<Entry>> entries;
    device::HostCopy host;
  };
  /// What SavedVariables live (a backward frees its nodes' as it goes; weak, so that
  /// packing holds no memory longer than autograd would).
  std::vector<std::weak_ptr<Entry>> entries_;
  std::vector<Moved> moved_;
  std::vector<device::Ready> reloaded_;
  int64_t away_bytes_ = 0;
};

}  // namespace pipelab
