/// Top-k sparsification (docs/compression.md "Codecs"; Rudakov et al., arXiv:2401.07788): the
/// k = ceil(fraction * numel) entries of largest magnitude travel as values and int32 flat
/// indices (ties: the lower index first); the rest decode as zeros. With error feedback per
/// stream (one boundary, one direction, one tensor): `ef` sends TopK(e + x) and keeps what it
/// left out, e <- e + x - sent; `ef21` sends TopK(x - g) and both ends move their estimate g
/// by what was sent, the receiver using g. The operators are the standard forms, UNVERIFIED as
/// to the paper (docs/compression.md): `error_feedback` has no silent default beyond none.
/// Evaluation compresses with plain TopK and leaves the state alone. A stream whose tensor
/// changes shape (a smaller last micro-batch) starts its state afresh, at both ends alike.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/compress/codec.h"

namespace pipelab {
namespace {

struct TopkOptions {
  enum class Feedback { None, Ef, Ef21 };
  double fraction = 0.1;
  Feedback feedback = Feedback::None;
  template <class V>
  void fields(V& v) {
    v("fraction", fraction, "share of the entries kept (largest magnitudes)", in_range(1e-9, 1));
    v.choice("error_feedback", feedback,
             Choices<Feedback>{{"none", Feedback::None}, {"ef", Feedback::Ef}, {"ef21", Feedback::Ef21}},
             "none; ef: send TopK(e + x), keep e <- e + x - sent; ef21: send TopK(x - g), both ends g <- g + sent "
             "(standard forms, UNVERIFIED against the paper)");
  }
};

/// Flat indices of the k largest magnitudes of `x` (ties: lower index), ascending.
template <class T>
std::vector<int32_t> largest(const T* x, int64_t n, int64_t k) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const auto before = [x](int32_t a, int32_t b) {
    const T ma = std::abs(x[a]), mb = std::abs(x[b]);
    return ma > mb || (ma == mb && a < b);
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

class Topk : public CodecWith<Topk, TopkOptions> {
 public:
  using CodecWith::CodecWith;
  int parts() const override { return 2; }
  bool stateful() const override { return options_.feedback != TopkOptions::Feedback::None; }
  c10::IValue state() const override { return state_.defined() ? c10::IValue(state_) : c10::IValue(); }
  void load_state(const c10::IValue& s) override { state_ = s.isTensor() ? s.toTensor().clone() : at::Tensor(); }
  int64_t storage_bytes() const override { return state_.defined() ? static_cast<int64_t>(state_.nbytes()) : 0; }

  std::vector<at::Tensor> encode(const at::Tensor& x0, const CodecCall& call) override {
    at::Tensor x = x0.detach().contiguous();
    TORCH_CHECK(x.numel() < (int64_t{1} << 31), "top-k indices are int32: a tensor of ", x.numel(), " elements");
    const bool state = call.training && options_.feedback != TopkOptions::Feedback::None;
    if (state) fresh_if_reshaped(x);
    at::Tensor target = !state ? x : options_.feedback == TopkOptions::Feedback::Ef ? state_ + x : x - state_;
    target = target.contiguous();
    const int64_t n = target.numel();
    const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(std::ceil(options_.fraction * static_cast<double>(n) - 1e-9)));
    at::Tensor indices = at::empty({k}, at::kInt), values;
    // Chosen on exact float32 copies of bf16/fp16 values; the values sent keep their dtype.
    const at::Tensor magnitudes = kernel_values(target).contiguous();
    AT_DISPATCH_FLOATING_TYPES(magnitudes.scalar_type(), "topk", [&] {
      const std::vector<int32_t> idx = largest(magnitudes.data_ptr<scalar_t>(), n, k);
      std::copy(idx.begin(), idx.end(), indices.data_ptr<int32_t>());
    });
    values = target.reshape({-1}).index_select(0, indices.to(at::kLong));
    if (state) {
      const at::Tensor sent = dense(values, indices, x.sizes(), x.scalar_type());
      if (options_.feedback == TopkOptions::Feedback::Ef) state_ = target - sent;
      else state_ = state_ + sent;
    }
    return {values, indices};
  }

  at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                    const CodecCall& call) override {
    at::Tensor sent = dense(parts.at(0), parts.at(1), shape, dtype);
    if (!call.training || options_.feedback != TopkOptions::Feedback::Ef21) return sent;
    fresh_if_reshaped(sent);
    state_ = state_ + sent;
    return state_.clone();
  }

 private:
  static at::Tensor dense(const at::Tensor& values, const at::Tensor& indices, at::IntArrayRef shape,
                          at::ScalarType dtype) {
    at::Tensor out = at::zeros(shape, values.options().dtype(dtype));
    out.reshape({-1}).index_copy_(0, indices.to(at::kLong), values.to(dtype));
    return out;
  }
  void fresh_if_reshaped(const at::Tensor& like) {
    if (!state_.defined() || !state_.sizes().equals(like.sizes()) || state_.scalar_type() != like.scalar_type()) {
      state_ = at::zeros_like(like);
    }
  }

  at::Tensor state_;  ///< ef: the error left out; ef21: the estimate g (each end its own)
};

}  // namespace

PIPELAB_REGISTER(Codec, Topk, "topk",
                 "the largest-magnitude share of the entries as values + int32 indices, optional error feedback");

}  // namespace pipelab
