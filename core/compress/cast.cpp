/// A cast to a 16-bit float (a plain baseline of the compression studies; docs/compression.md): bf16 keeps float32's
/// range with 8 bits of mantissa, fp16 10 bits in a narrower range (values beyond 65504 become
/// infinite, as any fp16 cast). Round to nearest even, as LibTorch's casts.
#include <ATen/ATen.h>

#include "core/compress/codec.h"

namespace pipelab {
namespace {

struct CastOptions {
  enum class To { Bf16, Fp16 };
  To to = To::Bf16;
  template <class V>
  void fields(V& v) {
    v.choice("dtype", to, Choices<To>{{"bf16", To::Bf16}, {"fp16", To::Fp16}}, "the 16-bit type that travels");
  }
};

class Cast : public CodecWith<Cast, CastOptions> {
 public:
  using CodecWith::CodecWith;
  int parts() const override { return 1; }
  std::vector<at::Tensor> encode(const at::Tensor& x, const CodecCall&) override {
    return {x.detach().to(options_.to == CastOptions::To::Bf16 ? at::kBFloat16 : at::kHalf).contiguous()};
  }
  at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                    const CodecCall&) override {
    return parts.at(0).to(dtype).reshape(shape);
  }
};

}  // namespace

PIPELAB_REGISTER(Codec, Cast, "cast", "a cast to bf16 or fp16 (2 bytes an element)");

}  // namespace pipelab
