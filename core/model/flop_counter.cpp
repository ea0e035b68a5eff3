#include "core/model/flop_counter.h"

#include <set>
#include <vector>

#include <ATen/core/ivalue.h>

#include <memory>

#include "core/util/error.h"

namespace pipelab {
namespace {

std::vector<int64_t> shape_of(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor().sizes().vec() : std::vector<int64_t>{};
}

/// An int[] or SymInt[] argument (sizes are concrete here: no tracing).
std::vector<int64_t> ints(const c10::IValue& v) {
  std::vector<int64_t> out;
  for (const c10::IValue& e : v.toListRef()) out.push_back(e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__));
  return out;
}

int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

/// Multiply-adds of a convolution from aten::convolution's arguments (input, weight, bias,
/// stride, padding, dilation, transposed, output_padding, groups).
int64_t convolution_macs(c10::ArrayRef<const c10::IValue> in) {
  const std::vector<int64_t> x = shape_of(in[0]), w = shape_of(in[1]);
  if (x.size() < 3 || w.size() != x.size()) return 0;
  const bool transposed = in[6].toBool();
  const size_t spatial = x.size() - 2;
  if (transposed) {
    // Each input element is multiplied with a (C_out/groups) x k window of the weight
    // [C_in, C_out/groups, k...].
    return product(x) * w[1] * product(w, 2);
  }
  const std::vector<int64_t> stride = ints(in[3]), padding = ints(in[4]), dilation = ints(in[5]);
  const auto at = [](const std::vector<int64_t>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
  int64_t outputs = x[0] * w[0];
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t k = w[2 + i];
    outputs *= (x[2 + i] + 2 * at(padding, i) - at(dilation, i) * (k - 1) - 1) / at(stride, i) + 1;
  }
  // Weight [C_out, C_in/groups, k...]: each output element takes C_in/groups x k products.
  return outputs * product(w, 1);
}

/// Multiply-adds of an RNN call (aten::lstm / gru / rnn_tanh / rnn_relu, input first, the
/// weights as a tensor list third): each 2-D weight is applied once per example and step.
int64_t rnn_macs(c10::ArrayRef<const c10::IValue> in) {
  if (in.size() < 3 || !in[0].isTensor() || !in[2].isTensorList()) return 0;  // packed sequences: not counted
  const at::Tensor x = in[0].toTensor();
  const int64_t steps_times_examples = x.numel() / x.size(-1);
  int64_t macs = 0;
  for (const at::Tensor& p : in[2].toTensorVector()) {
    if (p.dim() == 2) macs += steps_times_examples * p.numel();
  }
  return macs;
}

/// The class of a counted operator: a convolution by its groups and window, a product by
/// whether it reads a weight.
OpClass class_of(const std::string& op, c10::ArrayRef<const c10::IValue> in, bool weight) {
  if (op == "aten::convolution") {
    const std::vector<int64_t> x = shape_of(in[0]), w = shape_of(in[1]);
    const int64_t groups = in.size() > 8 && in[8].isInt() ? in[8].toInt() : 1;
    if (groups > 1 && x.size() > 1 && groups == x[1]) return OpClass::DepthwiseConv;
    if (!in[6].toBool() && product(w, 2) == 1) return OpClass::PointwiseConv;
    return OpClass::Conv;
  }
  if (op == "aten::lstm" || op == "aten::gru" || op == "aten::rnn_tanh" || op == "aten::rnn_relu") return OpClass::Recurrent;
  return weight ? OpClass::Gemm : OpClass::Attention;
}

/// Multiply-adds of operator `op` called with `in`, or -1 if `op` is not counted.
int64_t macs_of(const std::string& op, c10::ArrayRef<const c10::IValue> in) {
  if (op == "aten::mm") return product(shape_of(in[0])) * shape_of(in[1]).back();
  if (op == "aten::addmm") return product(shape_of(in[1])) * shape_of(in[2]).back();
  if (op == "aten::bmm") return product(shape_of(in[0])) * shape_of(in[1]).back();
  if (op == "aten::baddbmm") return product(shape_of(in[1])) * shape_of(in[2]).back();
  if (op == "aten::mv" || op == "aten::dot") return product(shape_of(in[0]));
  if (op == "aten::addmv") return product(shape_of(in[1]));
  if (op == "aten::convolution") return convolution_macs(in);
  if (op == "aten::lstm" || op == "aten::gru" || op == "aten::rnn_tanh" || op == "aten::rnn_relu") return rnn_macs(in);
  return -1;
}

/// Every operator's start hands its end this (an end sees only what its start returned):
/// whether it was counted.
struct Opened : at::ObserverContext {
  explicit Opened(bool c) : counted(c) {}
  bool counted;
  /// A product counted at depth 0: its class, and the bytes of its inputs (its outputs' are
  /// added at its end).
  int cls = -1;
  int64_t input_bytes = 0;
};

/// Operators that only make a new view of a tensor or allocate one: no kernel runs.
bool launches_nothing(const std::string& op) {
  static const std::set<std::string> none = {
      "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::transpose", "aten::t",
      "aten::permute", "aten::expand", "aten::select", "aten::slice", "aten::narrow", "aten::unsqueeze",
      "aten::squeeze", "aten::as_strided", "aten::detach", "aten::alias", "aten::empty", "aten::empty_strided",
      "aten::empty_like", "aten::flatten", "aten::split", "aten::chunk", "aten::unbind", "aten::lift_fresh",
      "aten::resize_", "aten::set_", "aten::to", "aten::contiguous", "aten::result_type", "aten::resolve_conj",
      "aten::resolve_neg", "aten::zeros", "aten::ones", "aten::size", "aten::numel", "aten::dim"};
  return none.count(op) > 0;
}

/// Per open operator on this thread, whether it was counted as a kernel (and then the FLOPs
/// counted before it and the bytes of its inputs: a kernel that counts none is priced by its
/// bytes); and how many of them are counted (an operator inside a counted one is its
/// implementation: not counted).
struct OpenOp {
  bool kernel = false;
  int64_t flops_before = 0, input_bytes = 0;
};

/// What the callbacks of this thread's counter keep between an operator's start and its
/// end. Thread-local because the RecordFunction callbacks are (at::addThreadLocalCallback):
/// a block profiled on one thread never sees another's operators.
struct Counting {
  FlopCounter* active = nullptr;  ///< this thread's counter, if one is counting
  std::vector<OpenOp> open_ops;
  int counted_open = 0;
};
Counting& counting() {
  thread_local Counting c;
  return c;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Counting& t = counting();
  FlopCounter* counter = t.active;
  if (counter == nullptr) return nullptr;
  const std::string op = fn.name();
  const bool kernel = t.counted_open == 0 && !launches_nothing(op);
  t.open_ops.push_back({kernel, counter->flops(), kernel ? counter->activation_bytes(fn.inputs()) : 0});
  if (kernel) {
    ++t.counted_open;
    ++counter->kernels;
  }
  const int64_t macs = macs_of(op, fn.inputs());
  if (macs < 0) return std::make_unique<Opened>(false);
  auto opened = std::make_unique<Opened>(true);
  if (counter->depth++ == 0) {
    const bool weight = counter->reads_weight(fn.inputs());
    const OpClass c = class_of(op, fn.inputs(), weight);
    counter->add(op, 2 * macs, weight, c);
    opened->cls = static_cast<int>(c);
    opened->input_bytes = counter->activation_bytes(fn.inputs());
  }
  return opened;
}

/// The bytes of what `fn` returned, weights aside.
int64_t output_bytes(const FlopCounter& counter, const at::RecordFunction& fn) {
  return counter.activation_bytes(c10::ArrayRef<const c10::IValue>(fn.outputs().data(), fn.outputs().size()));
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  Counting& t = counting();
  FlopCounter* active = t.active;
  if (active == nullptr) return;
  if (context != nullptr && static_cast<Opened*>(context)->counted) {
    --active->depth;
    const Opened& o = *static_cast<Opened*>(context);
    if (o.cls >= 0) active->add_operand_bytes(static_cast<OpClass>(o.cls), o.input_bytes + output_bytes(*active, fn));
  }
  if (t.open_ops.empty()) return;
  const OpenOp& open = t.open_ops.back();
  if (open.kernel) {
    --t.counted_open;
    // A kernel that counted no FLOPs (nor any inside it) is priced by its bytes.
    if (active->flops() == open.flops_before) active->add_memory_bytes(open.input_bytes + output_bytes(*active, fn));
  }
  t.open_ops.pop_back();
}

}  // namespace

FlopCounter::FlopCounter() {
  PIPELAB_ASSERT(counting().active == nullptr, "one FlopCounter per thread at a time");
  counting().active = this;
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() {
  at::removeCallback(handle_);
  counting() = Counting{};
}

const char* op_class_name(OpClass c) {
  static const char* const names[kOpClasses] = {"gemm", "attention", "conv", "depthwise_conv", "pointwise_conv",
                                                "recurrent"};
  return names[static_cast<size_t>(c)];
}

void FlopCounter::add(const std::string& op, int64_t flops, bool weight, OpClass c) {
  total_ += flops;
  if (weight) weight_total_ += flops;
  by_op_[op] += flops;
  by_class_[static_cast<size_t>(c)] += flops;
  ++calls_[static_cast<size_t>(c)];
}

int64_t FlopCounter::activation_bytes(c10::ArrayRef<const c10::IValue> values) const {
  int64_t n = 0;
  const auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.has_storage() && weights_.count(t.storage().unsafeGetStorageImpl()) > 0) return;
    n += static_cast<int64_t>(t.nbytes());
  };
  for (const c10::IValue& v : values) {
    if (v.isTensor()) add(v.toTensor());
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) add(t);
    }
  }
  return n;
}

bool FlopCounter::reads_weight(c10::ArrayRef<const c10::IValue> inputs) const {
  if (weights_.empty()) return false;
  const auto is_weight = [&](const at::Tensor& t) {
    return t.defined() && t.has_storage() && weights_.count(t.storage().unsafeGetStorageImpl()) > 0;
  };
  for (const c10::IValue& v : inputs) {
    if (v.isTensor() && is_weight(v.toTensor())) return true;
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (is_weight(t)) return true;
      }
    }
  }
  return false;
}

}  // namespace pipelab
