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
/// FLOPs = 2 x multiply-adds, per operator class (OpClass). Elementwise work (bias adds,
/// activations, normalisation, softmax, pooling) counts no FLOPs: its kernels' bytes are
/// counted instead (memory_bytes). Composite calls (aten::linear, aten::matmul) are counted
/// through the mm/addmm/bmm they dispatch to; calls made *inside* a counted operator (e.g.
/// an RNN's per-step addmm when it is not handed to oneDNN) are skipped, so nothing counts
/// twice whichever CPU/GPU kernel path ATen takes.
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <ATen/record_function.h>

namespace pipelab {

/// The classes of operators a cost model per operator class prices each at a rate of its own
/// (docs/simulate.md, "Costs: measured, given or derived"): matrix products that read a weight (a layer's GEMM),
/// products of two activations (attention's scores and mix), convolutions dense, depthwise
/// (one group per channel) and pointwise (1 x 1), and a recurrent layer's steps. Every other
/// kernel (element-wise, normalisation, softmax, pooling, an embedding's gather) is priced by
/// the bytes it reads and writes (FlopCounter::memory_bytes).
enum class OpClass : int { Gemm, Attention, Conv, DepthwiseConv, PointwiseConv, Recurrent };
constexpr size_t kOpClasses = 6;
/// Their names in cluster files and profiles: "gemm", "attention", "conv", "depthwise_conv",
/// "pointwise_conv", "recurrent".
const char* op_class_name(OpClass c);
using ClassFlops = std::array<int64_t, kOpClasses>;

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
  /// gradients, of both its operands (docs/simulate.md, "Costs: measured, given or derived").
  int64_t weight_flops() const { return weight_total_; }
  /// The storages (StorageImpl*) of the weights weight_flops() looks for.
  void set_weights(std::set<const void*> storages) { weights_ = std::move(storages); }
  bool reads_weight(c10::ArrayRef<const c10::IValue> inputs) const;
  /// The bytes of the tensors among `values` that are not weights.
  int64_t activation_bytes(c10::ArrayRef<const c10::IValue> values) const;
  /// The same, per operator name ("aten::addmm" -> FLOPs).
  const std::map<std::string, int64_t>& by_operator() const { return by_op_; }
  /// The same, per operator class.
  const ClassFlops& by_class() const { return by_class_; }
  /// The counted operators' calls per class: a small product's fixed costs (the kernel's
  /// set-up, its tail) weigh more against its FLOPs than a large one's.
  const ClassFlops& calls_by_class() const { return calls_; }
  /// The bytes each class's products read and write of activations (their operands and
  /// results but the weights, which a micro-batch reads once whatever its examples): a small
  /// product is as bound by them as by its FLOPs.
  const ClassFlops& operand_bytes_by_class() const { return operand_bytes_; }
  void add_operand_bytes(OpClass c, int64_t bytes) { operand_bytes_[static_cast<size_t>(c)] += bytes; }
  /// Bytes the kernels that count no FLOPs read and write (their tensor inputs and outputs,
  /// weights aside): the work of the memory-bound operators.
  int64_t memory_bytes() const { return memory_bytes_; }

  /// Called by the RecordFunction callbacks (public for them only).
  void add(const std::string& op, int64_t flops, bool weight = false, OpClass c = OpClass::Gemm);
  void add_memory_bytes(int64_t bytes) { memory_bytes_ += bytes; }
  int depth = 0;  ///< how many counted operators are open on this thread
  /// Operators called from outside any other counted one that compute something (not a
  /// view or an allocation): about the kernels a GPU launches, each with its fixed host
  /// cost (what runs inside one, such as addmm's bias copy, is its implementation).
  int64_t kernels = 0;

 private:
  at::CallbackHandle handle_;
  int64_t total_ = 0, weight_total_ = 0, memory_bytes_ = 0;
  std::map<std::string, int64_t> by_op_;
  ClassFlops by_class_{}, calls_{}, operand_bytes_{};
  std::set<const void*> weights_;
};

}  // namespace pipelab
