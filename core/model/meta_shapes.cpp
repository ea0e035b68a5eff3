#include "core/model/meta_shapes.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

namespace pipelab {
namespace {

at::Tensor empty_meta(c10::SymIntArrayRef sizes, const at::Tensor& like) {
  return at::empty_symint(sizes, like.options().device(at::kMeta));
}

/// index_select: the input's shape with `dim` as long as the index (an embedding's lookup).
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  std::vector<c10::SymInt> sizes(self.sym_sizes().begin(), self.sym_sizes().end());
  if (!sizes.empty()) sizes[static_cast<size_t>(c10::maybe_wrap_dim(dim, self.dim()))] = index.sym_numel();
  return empty_meta(sizes, self);
}

/// embedding_dense_backward: the weight's gradient, [num_weights, embedding width].
at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& /*indices*/, c10::SymInt num_weights,
                                    c10::SymInt /*padding_idx*/, bool /*scale_grad_by_freq*/) {
  return empty_meta({num_weights, grad.sym_size(-1)}, grad);
}

at::Tensor like(const at::Tensor& t) { return at::empty_like(t, t.options().device(at::kMeta)); }

/// Element-wise activations without meta kernels: the output is shaped as the input.
at::Tensor relu(const at::Tensor& self) { return like(self); }
at::Tensor& relu_(at::Tensor& self) { return self; }
at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& /*min*/, const at::Scalar& /*max*/) { return like(self); }
at::Tensor& hardtanh_(at::Tensor& self, const at::Scalar& /*min*/, const at::Scalar& /*max*/) { return self; }
at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& /*self*/, const at::Scalar& /*min*/,
                             const at::Scalar& /*max*/) {
  return like(grad);
}

/// equal() compares values, which meta tensors lack: a tensor equals itself (what
/// multi-head attention asks to tell self-attention apart), and nothing else is assumed to.
bool equal(const at::Tensor& self, const at::Tensor& other) { return self.is_same(other); }

/// Dropout's output and its mask (bool), as the CPU kernel returns them.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double /*p*/, std::optional<bool> /*train*/) {
  return {like(input), at::empty_like(input, input.options().dtype(at::kBool).device(at::kMeta))};
}
at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& /*mask*/, double /*scale*/) {
  return like(grad);
}

/// Per-channel statistics [C] (training) or none ([0], as the CPU kernel in evaluation).
at::Tensor channel_stats(const at::Tensor& input, bool training) {
  return at::empty({training ? input.size(1) : 0}, input.options().device(at::kMeta));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& /*weight*/, const std::optional<at::Tensor>& /*bias*/,
    const std::optional<at::Tensor>& /*running_mean*/, const std::optional<at::Tensor>& /*running_var*/, bool training,
    double /*momentum*/, double /*eps*/) {
  return {like(input), channel_stats(input, training), channel_stats(input, training)};
}

/// A parameter-shaped gradient when the mask asks for it and the parameter exists.
at::Tensor maybe_like(bool wanted, const std::optional<at::Tensor>& t) {
  return wanted && t.has_value() && t->defined() ? like(*t) : at::Tensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& /*running_mean*/, const std::optional<at::Tensor>& /*running_var*/,
    const std::optional<at::Tensor>& /*save_mean*/, const std::optional<at::Tensor>& /*save_invstd*/, bool /*train*/,
    double /*eps*/, std::array<bool, 3> mask) {
  const at::Tensor per_channel = at::empty({input.size(1)}, grad_out.options().device(at::kMeta));
  return {mask[0] ? like(input) : at::Tensor(), mask[1] && weight.has_value() && weight->defined() ? per_channel : at::Tensor(),
          mask[2] ? like(per_channel) : at::Tensor()};
}

/// Layer norm: the output, and the mean and 1/std per normalised row, shaped
/// input.shape[:axis] + [1] * len(normalized_shape) as the CPU kernel returns them.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 c10::SymIntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& /*weight*/,
                                                                 const std::optional<at::Tensor>& /*bias*/,
                                                                 double /*eps*/) {
  std::vector<c10::SymInt> stats(input.sym_sizes().begin(), input.sym_sizes().end());
  for (size_t k = stats.size() - normalized_shape.size(); k < stats.size(); ++k) stats[k] = 1;
  const at::Tensor mean = at::empty_symint(stats, input.options().dtype(at::kFloat).device(at::kMeta));
  return {like(input), mean, like(mean)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& /*grad_out*/, const at::Tensor& input, c10::SymIntArrayRef /*normalized_shape*/,
    const at::Tensor& /*mean*/, const at::Tensor& /*rstd*/, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  return {mask[0] ? like(input) : at::Tensor(), maybe_like(mask[1], weight), maybe_like(mask[2], bias)};
}

/// Group norm: the output, and the mean and 1/std per example and group ([N, groups]).
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& /*weight*/, const std::optional<at::Tensor>& /*bias*/,
    c10::SymInt n, c10::SymInt /*channels*/, c10::SymInt /*hw*/, int64_t groups, double /*eps*/) {
  const at::Tensor mean = at::empty_symint({n, groups}, input.options().device(at::kMeta));
  return {like(input), mean, like(mean)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& /*grad_out*/, const at::Tensor& input, const at::Tensor& /*mean*/, const at::Tensor& /*rstd*/,
    const std::optional<at::Tensor>& weight, c10::SymInt /*n*/, c10::SymInt channels, c10::SymInt /*hw*/,
    int64_t /*groups*/, std::array<bool, 3> mask) {
  const at::Tensor per_channel = at::empty_symint({channels}, input.options().device(at::kMeta));
  return {mask[0] ? like(input) : at::Tensor(), mask[1] && weight.has_value() && weight->defined() ? per_channel : at::Tensor(),
          mask[2] ? like(per_channel) : at::Tensor()};
}

at::Tensor logical_not(const at::Tensor& self) { return at::empty_like(self, self.options().dtype(at::kBool).device(at::kMeta)); }

/// Adaptive average pooling: [N, C] (or [C]) followed by the requested output size.
at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  std::vector<c10::SymInt> out(self.sym_sizes().begin(), self.sym_sizes().end() - 2);
  out.insert(out.end(), output_size.begin(), output_size.end());
  return at::empty_symint(out, self.options().device(at::kMeta));
}
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& /*grad_output*/, const at::Tensor& self) { return like(self); }

/// A convolution's output: per spatial axis (in + 2 pad - dilation (kernel - 1) - 1) / stride
/// + 1, or, transposed, (in - 1) stride - 2 pad + dilation (kernel - 1) + output_padding + 1;
/// channels weight.size(0), or weight.size(1) x groups transposed (PyTorch's Conv docs).
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& /*bias*/,
                       c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                       bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const int64_t spatial = input.dim() - 2;
  std::vector<c10::SymInt> out{input.sym_size(0), transposed ? weight.sym_size(1) * groups : weight.sym_size(0)};
  const auto at = [](c10::SymIntArrayRef v, int64_t k) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(k)]; };
  for (int64_t k = 0; k < spatial; ++k) {
    const c10::SymInt in = input.sym_size(k + 2), kernel = weight.sym_size(k + 2);
    const c10::SymInt reach = at(dilation, k) * (kernel - 1);
    out.push_back(transposed ? (in - 1) * at(stride, k) - 2 * at(padding, k) + reach +
                                   (output_padding.empty() ? c10::SymInt(0) : at(output_padding, k)) + 1
                             : (in + 2 * at(padding, k) - reach - 1) / at(stride, k) + 1);
  }
  return at::empty_symint(out, input.options().device(at::kMeta));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef /*stride*/,
    c10::SymIntArrayRef /*padding*/, c10::SymIntArrayRef /*dilation*/, bool transposed, c10::SymIntArrayRef /*output_padding*/,
    c10::SymInt groups, std::array<bool, 3> mask) {
  const c10::SymInt channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  return {mask[0] ? like(input) : at::Tensor(), mask[1] ? like(weight) : at::Tensor(),
          mask[2] ? at::empty_symint({channels}, grad_output.options().device(at::kMeta)) : at::Tensor()};
}

/// Registers `kernel` for `op` on the meta device unless the loaded LibTorch has one.
template <class Kernel>
void add(torch::Library& lib, const char* op, Kernel kernel) {
  const auto handle = c10::Dispatcher::singleton().findSchema({std::string("aten::") + op, ""});
  if (handle && handle->hasKernelForDispatchKey(c10::DispatchKey::Meta)) return;
  lib.impl(op, kernel);
}

}  // namespace

void register_meta_shape_functions() {
  // Alive for the process: the registrations end with the Library object.
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
  add(*lib, "index_select", TORCH_FN(index_select));
  add(*lib, "embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  add(*lib, "relu", TORCH_FN(relu));
  add(*lib, "relu_", TORCH_FN(relu_));
  add(*lib, "hardtanh", TORCH_FN(hardtanh));
  add(*lib, "hardtanh_", TORCH_FN(hardtanh_));
  add(*lib, "hardtanh_backward", TORCH_FN(hardtanh_backward));
  add(*lib, "equal", TORCH_FN(equal));
  add(*lib, "logical_not", TORCH_FN(logical_not));
  add(*lib, "_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool2d));
  add(*lib, "_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool2d_backward));
  add(*lib, "native_dropout", TORCH_FN(native_dropout));
  add(*lib, "native_dropout_backward", TORCH_FN(native_dropout_backward));
  add(*lib, "native_batch_norm", TORCH_FN(native_batch_norm));
  add(*lib, "native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  add(*lib, "native_layer_norm", TORCH_FN(native_layer_norm));
  add(*lib, "native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  add(*lib, "native_group_norm", TORCH_FN(native_group_norm));
  add(*lib, "native_group_norm_backward", TORCH_FN(native_group_norm_backward));
  // A convolution on a device other than the CPU and CUDA goes to the *_overrideable pair.
  add(*lib, "convolution_overrideable", TORCH_FN(convolution));
  add(*lib, "convolution_backward_overrideable", TORCH_FN(convolution_backward));
}

}  // namespace pipelab
