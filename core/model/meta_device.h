#pragma once
/// Shapes without storage: a block on LibTorch's meta device runs its forward, its backward
/// and its optimizer's step as the CPU would (the same operators, the same outputs' shapes
/// and dtypes, the same tensors autograd saves) without computing or storing a value, so a
/// 70B-parameter model's per-block FLOPs and bytes are known in seconds (`pipelab plan`,
/// docs/plan.md, "Profiles from shapes").
///
/// Three things LibTorch's C++ library lacks, and this file adds:
/// - Moving a built module to meta. Module::to(kMeta) refuses (set_data() checks that the
///   two tensors' dispatch keys match, a guard for sparse and other tensor classes); a CPU
///   tensor and a meta tensor are both plain TensorImpls, so the meta tensor's metadata is
///   copied into each parameter and buffer in place (TensorImpl::shallow_copy_from, what
///   set_data does after its check), keeping every reference a module holds valid.
/// - Counting meta bytes. The meta allocator allocates nothing and tells no one; ours hands
///   out the same empty storage and reports each allocation and free (under a unique fake
///   address, as host memory) to the thread's memory reporter, so a MemoryMeter
///   (core/util/memory_meter.h) measures a meta run as it measures a CPU one.
/// - Shape functions for the operators whose meta kernels live in PyTorch's Python
///   (torch/_meta_registrations.py): an embedding's index_select, convolutions and their
///   backward, batch normalisation. Registered at run time, each only where the loaded
///   LibTorch has none (another version may have it).
/// An operator that still has none (a custom operator, or one that reads values: `.item()`,
/// nonzero) throws c10::NotImplementedError or c10::Error; callers fall back to measuring.
#include <torch/nn/module.h>

#include <map>
#include <stdexcept>
#include <string>

#include "core/model/model.h"

namespace pipelab {

/// Installs the counting meta allocator and the shape functions (once per process; cheap
/// after the first call).
void enable_meta_profiling();

/// Moves every parameter and buffer of `module` (and its children) to the meta device in
/// place: same shapes, dtypes, strides and requires_grad, no storage. Calls
/// enable_meta_profiling().
void to_meta(torch::nn::Module& module);

/// The blocks of one model for a profile: built as a run builds them (seeded per block), on
/// the CPU, or on the meta device (core/model/meta_construction.h), where blocks whose recipes share a shape_key share
/// one module, built once (a 70B model's 80 layers cost one layer's construction), and every
/// meta block is kept for the next profile that asks for it.
class ProfileBlocks {
 public:
  ProfileBlocks(const ModelDef& def, uint64_t seed, bool meta) : def_(def), seed_(seed), meta_(meta) {}
  Block operator()(size_t index);
  bool meta() const { return meta_; }
  /// Where the profile's inputs live.
  at::Device device() const { return meta_ ? at::Device(at::kMeta) : at::Device(at::kCPU); }

 private:
  const ModelDef& def_;
  uint64_t seed_;
  bool meta_;
  Block build_on_meta(size_t index) const;
  std::map<std::string, torch::nn::AnyModule> built_;  ///< meta modules by shape key (or "#<index>")
};

/// A model the meta device cannot profile faithfully.
struct MetaUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Refuses (MetaUnsupported) a profile that ran `op`, when its CPU and GPU kernels keep more
/// for the backward than its meta decomposition does: a fused LSTM, GRU or RNN keeps a
/// workspace (oneDNN's, cuDNN's reserve) where the decomposed cells keep their gates, half
/// the bytes on this repository's residual_lstm.
void check_meta_faithful(const std::string& op);

/// The operator a meta run failed on, from its exception's message ("aten::index_select"),
/// or the message's first line when it names none.
std::string meta_failure(const std::exception& e);

}  // namespace pipelab
