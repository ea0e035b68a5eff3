/// The plain baseline quantizer (gpipe_test's uniform baseline; docs/compression.md "Codecs"): the
/// whole micro-batch tensor on one grid of 2^bits levels from its min to its max, step =
/// (max - min) / (2^bits - 1), level = round((x - min) / step) (half to even), |x - x̂| <=
/// step / 2. The code is the level minus 2^(bits-1), so it fills a signed int8 (bits <= 8) or
/// int16, as gpipe_test's baseline sends it; side information: (min, step).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/compress/codec.h"

namespace pipelab {
namespace {

struct UniformOptions {
  int bits = 4;
  template <class V>
  void fields(V& v) {
    v("bits", bits, "bits per element (2^bits levels between the tensor's min and max)", in_range(1, 16));
  }
};

class Uniform : public CodecWith<Uniform, UniformOptions> {
 public:
  using CodecWith::CodecWith;
  int parts() const override { return 2; }

  std::vector<at::Tensor> encode(const at::Tensor& x0, const CodecCall&) override {
    const at::Tensor x = kernel_values(x0.detach()).contiguous();
    const at::ScalarType code_type = options_.bits <= 8 ? at::kChar : at::kShort;
    at::Tensor codes = at::empty(x.sizes(), at::TensorOptions().dtype(code_type));
    at::Tensor side = at::empty({2}, x.options());
    const int64_t levels = (int64_t{1} << options_.bits) - 1, half = int64_t{1} << (options_.bits - 1);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "uniform", [&] {
      const auto* v = x.data_ptr<scalar_t>();
      const int64_t n = x.numel();
      const scalar_t lo = n ? *std::min_element(v, v + n) : scalar_t(0);
      const scalar_t hi = n ? *std::max_element(v, v + n) : scalar_t(0);
      const scalar_t step = (hi - lo) / static_cast<scalar_t>(levels);
      side.data_ptr<scalar_t>()[0] = lo;
      side.data_ptr<scalar_t>()[1] = step;
      const auto code = [&](int64_t k) {
        return step == 0 ? -half : std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint((v[k] - lo) / step)), 0, levels) - half;
      };
      if (code_type == at::kChar) {
        auto* c = codes.data_ptr<int8_t>();
        for (int64_t k = 0; k < n; ++k) c[k] = static_cast<int8_t>(code(k));
      } else {
        auto* c = codes.data_ptr<int16_t>();
        for (int64_t k = 0; k < n; ++k) c[k] = static_cast<int16_t>(code(k));
      }
    });
    return {codes, side};
  }

  at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                    const CodecCall&) override {
    const at::Tensor& side = parts.at(1);
    const double half = static_cast<double>(int64_t{1} << (options_.bits - 1));
    // (code + 2^(bits-1)) * step + min, in the side information's dtype.
    return ((parts.at(0).to(side.scalar_type()) + half) * side[1] + side[0]).reshape(shape).to(dtype);
  }
};

}  // namespace

PIPELAB_REGISTER(Codec, Uniform, "uniform",
                 "one uniform grid of 2^bits levels from the tensor's min to its max (gpipe_test's baseline)");

}  // namespace pipelab
