// Written by hand because LibTorch's autocast is tied to its tensors' device: there is no
// way to ask it to cast meta tensors. The policy lists are facts from PyTorch's
// aten/src/ATen/autocast_mode.cpp; tests/tools/shape_autocast_test.cpp holds it to the dtypes
// LibTorch's own autocast gives on this CPU, and tests/tools/memory_from_shapes_test.cpp the
// profile made with it to the bytes a run keeps.
#include "tools/simulate/shape_autocast.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <set>
#include <string>
#include <unordered_map>

namespace pipelab::sim {
namespace {

enum class Cast { None, Lower, Float32, Widest };

struct Policy {
  std::set<std::string> lower, float32, widest;
};

/// PyTorch's CPU list also has mkldnn_rnn_layer; pipelab's LSTMs run in float32 under a
/// CPU autocast (models/residual_lstm.cpp), so it is left out.
const Policy& cpu_policy() {
  static const Policy p{
      {"conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm", "addbmm", "linear",
       "_convolution", "matmul", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
       "conv_transpose3d", "prelu", "scaled_dot_product_attention", "_native_multi_head_attention"},
      {"avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile", "nanquantile", "stft",
       "cdist", "trace", "view_as_complex", "cholesky", "inverse", "pinverse", "max_pool3d", "max_unpool2d",
       "max_unpool3d", "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d", "replication_pad1d",
       "replication_pad2d", "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
       "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss", "l1_loss", "huber_loss",
       "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "ctc_loss", "kl_div",
       "multilabel_margin_loss", "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_rfft", "fft_irfft"},
      {"stack", "cat", "index_copy"}};
  return p;
}

const Policy& cuda_policy() {
  static const Policy p{
      {"_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
       "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
       "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
       "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
       "_scaled_dot_product_flash_attention", "scaled_dot_product_attention"},
      {"acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
       "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "group_norm", "frobenius_norm",
       "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
       "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
       "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
       "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
       "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm", "norm", "sum"},
      {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put", "scatter_add",
       "tensordot"}};
  return p;
}

/// This thread's autocast: its dtype, policy, nesting, and the parameters' casts of the
/// outermost scope (autocast caches a leaf's cast to the lower precision until then).
struct State {
  at::ScalarType dtype = at::kBFloat16;
  const Policy* policy = nullptr;
  int depth = 0;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> cache;
};
thread_local State state;

constexpr c10::DispatchKey kKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

Cast cast_of(const std::string& op) {
  const std::string name = op.rfind("aten::", 0) == 0 ? op.substr(6) : op;
  if (state.policy->lower.count(name)) return Cast::Lower;
  if (state.policy->float32.count(name)) return Cast::Float32;
  if (state.policy->widest.count(name)) return Cast::Widest;
  return Cast::None;
}

at::Tensor cast(const at::Tensor& t, at::ScalarType to) {
  if (!t.defined() || !t.is_floating_point() || t.scalar_type() == to || t.scalar_type() == at::kDouble) return t;
  const bool cacheable = to == state.dtype && t.scalar_type() == at::kFloat && t.requires_grad() && t.is_leaf() &&
                         !t.is_view();
  if (!cacheable) return t.to(to);
  auto it = state.cache.find(t.unsafeGetTensorImpl());
  if (it == state.cache.end()) it = state.cache.emplace(t.unsafeGetTensorImpl(), t.to(to)).first;
  return it->second;
}

/// The widest floating dtype among the arguments (Widest's target).
at::ScalarType widest(c10::ArrayRef<c10::IValue> args) {
  at::ScalarType out = state.dtype;
  const auto see = [&](const at::Tensor& t) {
    if (t.defined() && t.is_floating_point() && c10::elementSize(t.scalar_type()) > c10::elementSize(out)) {
      out = t.scalar_type();
    }
  };
  for (const c10::IValue& v : args) {
    if (v.isTensor()) see(v.toTensor());
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) see(t);
    }
  }
  return out;
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const Cast how = state.policy ? cast_of(op.schema().name()) : Cast::None;
  if (how == Cast::None) {
    // As autocast's fallthrough: the operator's own kernel runs, and what it calls is seen.
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kKey), stack);
    return;
  }
  // As autocast's kernels: the cast arguments, and nothing below cast again.
  c10::impl::ExcludeDispatchKeyGuard below(kKey);
  const size_t n = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, n);
  const at::ScalarType to = how == Cast::Lower ? state.dtype : how == Cast::Float32 ? at::kFloat : widest(args);
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(n); it != stack->end(); ++it) {
    if (it->isTensor()) {
      *it = cast(it->toTensor(), to);
    } else if (it->isTensorList()) {
      std::vector<at::Tensor> list = it->toTensorVector();
      for (at::Tensor& t : list) t = cast(t, to);
      *it = c10::IValue(list);
    }
  }
  op.callBoxed(stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); }

struct ShapeAutocast::Saved {
  at::ScalarType dtype;
  const Policy* policy;
  bool included;
};

ShapeAutocast::ShapeAutocast(at::ScalarType dtype, c10::DeviceType device) { enter(dtype, device); }

void ShapeAutocast::enter(at::ScalarType dtype, c10::DeviceType device) {
  saved_ = std::make_unique<Saved>(Saved{state.dtype, state.policy, c10::impl::tls_is_dispatch_key_included(kKey)});
  state.dtype = dtype;
  state.policy = device == c10::DeviceType::CUDA ? &cuda_policy() : &cpu_policy();
  ++state.depth;
  c10::impl::tls_set_dispatch_key_included(kKey, true);
}

ShapeAutocast::ShapeAutocast(const AutocastSpec* spec) {
  if (spec) enter(spec->dtype, spec->device);
}

ShapeAutocast::~ShapeAutocast() {
  if (!saved_) return;
  if (--state.depth == 0) state.cache.clear();
  state.dtype = saved_->dtype;
  state.policy = saved_->policy;
  c10::impl::tls_set_dispatch_key_included(kKey, saved_->included);
}

}  // namespace pipelab::sim
