#pragma once
/// Forward FLOPs of whatever runs on this thread, counted from the shapes of the ATen calls.
///
/// A thread-local at::RecordFunction callback (the hook LibTorch's profiler uses) sees every
/// operator call with its arguments; for the operators that do the multiply-adds of DNN
/// layers it computes the count analytically from the argument shapes:
///
///   aten::mm, addmm          M x K times K x N           M*N*K
///   aten::bmm, baddbmm       B x (M x K times K x N)     B*M*N*K
///   aten::mv, addmv, dot     matrix-vector, dot product
///   aten::convolution        per output element (C_in/groups)*kH*kW (transposed: per input element)
///   aten::lstm, gru, rnn_*   every 2-D weight of the layer once per time step and example
///
/// FLOPs = 2 x multiply-adds. Elementwise work (bias adds, activations, normalisation,
/// softmax, pooling) is not counted. Composite calls (aten::linear, aten::matmul) are counted
/// through the mm/addmm/bmm they dispatch to; calls made *inside* a counted operator (e.g.
/// an RNN's per-step addmm when it is not handed to oneDNN) are skipped, so nothing counts
/// twice whichever CPU/GPU kernel path ATen takes.
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <ATen/record_function.h>

namespace pipelab {

/// Counts FLOPs on the current thread between construction and destruction. One counter per
/// thread at a time.
class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  /// FLOPs (2 x multiply-adds) counted so far.
  int64_t flops() const { return total_; }
  /// Of them, those of operators with a weight among their inputs (a tensor whose storage is
  /// one of `weights`, a view of it included): what a backward's weight gradients compute
  /// again, where an operator of two activations (attention's scores) has only input
  /// gradients, of both its operands (docs/simulate.md, "Derived costs").
  int64_t weight_flops() const { return weight_total_; }
  /// The storages (StorageImpl*) of the weights weight_flops() looks for.
  void set_weights(std::set<const void*> storages) { weights_ = std::move(storages); }
  bool reads_weight(c10::ArrayRef<const c10::IValue> inputs) const;
  /// The same, per operator name ("aten::addmm" -> FLOPs).
  const std::map<std::string, int64_t>& by_operator() const { return by_op_; }

  /// Called by the RecordFunction callbacks (public for them only).
  void add(const std::string& op, int64_t flops, bool weight = false);
  int depth = 0;  ///< how many counted operators are open on this thread
  /// Operators called from outside any other counted one that compute something (not a
  /// view or an allocation): about the kernels a GPU launches, each with its fixed host
  /// cost (what runs inside one, such as addmm's bias copy, is its implementation).
  int64_t kernels = 0;

 private:
  at::CallbackHandle handle_;
  int64_t total_ = 0, weight_total_ = 0;
  std::map<std::string, int64_t> by_op_;
  std::set<const void*> weights_;
};

}  // namespace pipelab
