/// AQ-SGD's quantizer (compress/fixpoint.h; docs/compression.md "Codecs") and the `fixpoint`
/// codec that applies it directly, as AC-SGD compresses gradients
/// (`--backward-compress-method fixpoint`).
#include "core/compress/fixpoint.h"

#include <ATen/ATen.h>

#include "core/compress/codec.h"

namespace pipelab::compress {
namespace {

/// The dimensions reduced to one scale, and the shape a scale broadcasts in.
std::pair<std::vector<int64_t>, std::vector<int64_t>> scale_layout(const at::Tensor& x, ScaleDims dims) {
  const int64_t d = x.dim();
  int64_t kept = -1;  // the dimension scales run along (-1: one scale)
  if (dims == ScaleDims::Last && d >= 2) kept = d - 1;
  if (dims == ScaleDims::Channel && d >= 2) kept = 1;
  std::vector<int64_t> reduce, shape(static_cast<size_t>(d), 1);
  for (int64_t k = 0; k < d; ++k) {
    if (k == kept) shape[static_cast<size_t>(k)] = x.size(k);
    else reduce.push_back(k);
  }
  return {reduce, shape};
}

}  // namespace

at::Tensor pack_bits(const at::Tensor& codes, int bits) {
  const at::Tensor c = codes.contiguous().reshape({-1});
  const int64_t n = c.numel();
  if (bits == 8) return c.clone();
  at::Tensor out = at::zeros({(n * bits + 7) / 8}, at::kByte);
  const uint8_t* in = c.data_ptr<uint8_t>();
  uint8_t* o = out.data_ptr<uint8_t>();
  uint64_t acc = 0;
  int held = 0;
  int64_t w = 0;
  for (int64_t k = 0; k < n; ++k) {
    acc |= static_cast<uint64_t>(in[k]) << held;
    held += bits;
    while (held >= 8) {
      o[w++] = static_cast<uint8_t>(acc);
      acc >>= 8;
      held -= 8;
    }
  }
  if (held > 0) o[w] = static_cast<uint8_t>(acc);
  return out;
}

at::Tensor unpack_bits(const at::Tensor& packed, int64_t n, int bits) {
  const at::Tensor p = packed.contiguous();
  TORCH_CHECK(p.scalar_type() == at::kByte && p.numel() == (n * bits + 7) / 8, "packed codes of ", p.numel(),
              " bytes for ", n, " codes of ", bits, " bits");
  if (bits == 8) return p.clone();
  at::Tensor out = at::empty({n}, at::kByte);
  const uint8_t* in = p.data_ptr<uint8_t>();
  uint8_t* o = out.data_ptr<uint8_t>();
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t acc = 0;
  int held = 0;
  int64_t r = 0;
  for (int64_t k = 0; k < n; ++k) {
    while (held < bits) {
      acc |= static_cast<uint64_t>(in[r++]) << held;
      held += 8;
    }
    o[k] = static_cast<uint8_t>(acc & mask);
    acc >>= bits;
    held -= bits;
  }
  return out;
}

std::vector<at::Tensor> fixpoint_encode(const at::Tensor& x0, const FixpointOptions& o) {
  const at::Tensor x = x0.detach().contiguous();
  const auto [reduce, shape] = scale_layout(x, o.scale_dims);
  at::Tensor s16 = (reduce.empty() ? x.abs() : x.abs().amax(reduce, true)).to(at::kHalf);
  if (x.dim() == 0) s16 = s16.reshape({});
  const at::Tensor s = s16.to(x.scalar_type()).reshape(shape);
  const double half = static_cast<double>(1 << (o.bits - 1));
  // x / (s + 1e-6) * 2^(b-1), rounded half to even (torch.round), clipped, offset.
  const at::Tensor q = (x / (s + 1e-6) * half).round().clamp(-half, half - 1) + half;
  return {pack_bits(q.to(at::kByte), o.bits), s16.reshape({-1}).contiguous()};
}

at::Tensor fixpoint_decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                           const FixpointOptions& o) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  const at::Tensor like = at::empty(shape, at::TensorOptions().dtype(dtype));
  const auto [reduce, scale_shape] = scale_layout(like, o.scale_dims);
  int64_t scales = 1;
  for (const int64_t d : scale_shape) scales *= d;
  TORCH_CHECK(parts.at(1).numel() == scales, "fixpoint: ", parts.at(1).numel(), " scales for ", scales, " groups");
  const at::Tensor s = parts.at(1).to(dtype).reshape(scale_shape);
  const double half = static_cast<double>(1 << (o.bits - 1));
  const at::Tensor q = unpack_bits(parts.at(0), n, o.bits).to(dtype).reshape(shape);
  return (q - half) / half * s;
}

namespace {

class Fixpoint : public CodecWith<Fixpoint, FixpointOptions> {
 public:
  using CodecWith::CodecWith;
  int parts() const override { return 2; }
  std::vector<at::Tensor> encode(const at::Tensor& x, const CodecCall&) override {
    return fixpoint_encode(x, options_);
  }
  at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                    const CodecCall&) override {
    return fixpoint_decode(parts, shape, dtype, options_);
  }
};

}  // namespace

PIPELAB_REGISTER(Codec, Fixpoint, "fixpoint",
                 "AQ-SGD's b-bit quantizer applied directly (AC-SGD's gradients): codes packed b bits each + an "
                 "fp16 max-abs scale per group");

}  // namespace pipelab::compress
