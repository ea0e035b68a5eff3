/// gpipe_test's sort quantization (docs/compression.md): the micro-batch tensor's
/// values fall into 2^S groups of near-equal count by rank (quantile bins), and each group is
/// quantized uniformly to 2^Q levels between its own min and max. A code is the group's id in
/// its high bits and the level in its low Q bits; with Q+S of 8 or 16 it is shifted by
/// -2^(Q+S-1) to fill a signed int8 or int16. Side information: (min, step) per group.
///
/// The groups are order statistics, not a sort (compress/rank_groups.h): ranks order by
/// (value, index), the order a stable sort gives, so the groups are those of gpipe_test's sort
/// path, ties included.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/compress/codec.h"
#include "core/compress/rank_groups.h"

namespace pipelab {
namespace {

struct SortQuantOptions {
  int q = 6;
  int s = 2;
  bool fast = false;
  bool reference_decoder = false;
  template <class V>
  void fields(V& v) {
    v("q", q, "level bits per group (2^q levels)", in_range(1, 16));
    v("s", s, "split bits (2^s groups of near-equal count by rank)", in_range(0, 8));
    v("fast", fast,
      "gpipe_test's sender-side fast variant: group boundaries are order statistics of sample 0 only "
      "(groups of unequal count)");
    v("reference_decoder", reference_decoder,
      "fidelity flag for a gpipe_test bug: its fast decoder never writes elements whose code is 0 when q+s is not "
      "8 or 16, which decode as 0 (the SQ12 rows of its tables); off: the correct decode");
  }
  void check(const ConfigNode& node) const {
    if (q + s > 16) node.child("q").fail(fmt::format("q + s = {} bits do not fit the int16 codes", q + s), "keep q + s <= 16");
  }
};

/// The shift of 8- and 16-bit codes (sort-quantization encode, docs/compression.md "Codecs").
int64_t shift_of(int q, int s) { return q + s == 8 || q + s == 16 ? int64_t{1} << (q + s - 1) : 0; }

/// Round half to even, as torch.round, in a form the compiler vectorizes: adding and
/// subtracting 1.5 * 2^(mantissa bits) rounds in the current (nearest-even) mode; exact for
/// 0 <= y < 2^22 (float) or 2^51 (double), and levels stay below 2^16.
template <class T>
T round_even(T y) {
  constexpr T big = std::is_same_v<T, float> ? T(12582912.0) : T(6755399441055744.0);
  return (y + big) - big;  // SSE arithmetic rounds each step to T (no excess precision)
}

/// Each group's min and max by a pass over the elements (the fast variant's groups are not
/// ranks).
template <class T>
void group_min_max(const T* x, int64_t n, const uint8_t* group, int groups, T* lo, T* hi) {
  std::fill(lo, lo + groups, std::numeric_limits<T>::infinity());
  std::fill(hi, hi + groups, -std::numeric_limits<T>::infinity());
  for (int64_t k = 0; k < n; ++k) {
    lo[group[k]] = std::min(lo[group[k]], x[k]);
    hi[group[k]] = std::max(hi[group[k]], x[k]);
  }
  for (int g = 0; g < groups; ++g) {
    if (lo[g] > hi[g]) lo[g] = hi[g] = T(0);  // an empty group
  }
}

/// Codes and side information from each element's group, whose levels span `lo[g]` to
/// `hi[g]`.
template <class T, class Code>
void encode_by_group(const T* x, int64_t n, const uint8_t* group, const SortQuantOptions& o, const T* lo,
                     const T* hi, Code* codes, T* side) {
  const int groups = 1 << o.s;
  const int64_t levels = (int64_t{1} << o.q) - 1;
  const int64_t shift = shift_of(o.q, o.s);
  T low[256], divisor[256];
  int64_t base[256];
  for (int g = 0; g < groups; ++g) {
    const T step = (hi[g] - lo[g]) / static_cast<T>(levels);
    side[2 * g] = low[g] = lo[g];
    side[2 * g + 1] = step;
    // A group of one value has step 0 and every level 0: (x - lo) / 1 is 0 there.
    divisor[g] = step == 0 ? T(1) : step;
    base[g] = (int64_t{g} << o.q) - shift;
  }
  for (int64_t k = 0; k < n; ++k) {
    const int g = group[k];
    const T y = (x[k] - low[g]) / divisor[g];
    const int64_t level = std::clamp<int64_t>(static_cast<int64_t>(round_even(y)), 0, levels);
    codes[k] = static_cast<Code>(base[g] + level);
  }
}

template <class T, class Code>
void encode_exact(const T* x, int64_t n, const SortQuantOptions& o, Code* codes, T* side) {
  const int groups = 1 << o.s;
  // The first (n mod G) groups take one more element.
  std::vector<int64_t> first(static_cast<size_t>(groups) + 1);
  for (int g = 0; g <= groups; ++g) first[g] = g * (n / groups) + std::min<int64_t>(g, n % groups);
  // Reused across calls, per thread (every stage's codec runs on its own thread at once).
  thread_local std::vector<uint8_t> group;
  if (group.size() < static_cast<size_t>(n)) group.resize(static_cast<size_t>(n));
  std::vector<T> lo(static_cast<size_t>(groups)), hi(static_cast<size_t>(groups));
  compress::rank_groups(x, n, first, group.data(), lo.data(), hi.data());
  encode_by_group(x, n, group.data(), o, lo.data(), hi.data(), codes, side);
}

/// gpipe_test's fast variant: boundaries b_i are the k-th smallest values of sample 0,
/// k = floor(n (i+1) / (G batch)), the last one the global max; group i = (b_{i-1}, b_i].
template <class T, class Code>
void encode_fast(const T* x, int64_t n, int64_t batch, const SortQuantOptions& o, Code* codes, T* side) {
  const int groups = 1 << o.s;
  const int64_t per = std::max<int64_t>(1, n / std::max<int64_t>(batch, 1));
  std::vector<T> sample(x, x + std::min(per, n));
  std::sort(sample.begin(), sample.end());
  std::vector<T> bound(static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) {
    const int64_t k = std::clamp<int64_t>(n * (g + 1) / (int64_t{groups} * std::max<int64_t>(batch, 1)), 1,
                                          static_cast<int64_t>(sample.size()));
    bound[g] = sample[static_cast<size_t>(k - 1)];
  }
  bound.back() = *std::max_element(x, x + n);
  std::vector<uint8_t> group(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    // The first group whose bound is >= the value (values below b_{-1} = -1e9 join group 0).
    group[k] = static_cast<uint8_t>(std::lower_bound(bound.begin(), bound.end(), x[k]) - bound.begin());
  }
  std::vector<T> lo(static_cast<size_t>(groups)), hi(static_cast<size_t>(groups));
  group_min_max(x, n, group.data(), groups, lo.data(), hi.data());
  // The step reaches the group's bound, not its own max: (b_i - min_i) / (2^Q - 1).
  std::copy(bound.begin(), bound.end(), hi.begin());
  encode_by_group(x, n, group.data(), o, lo.data(), hi.data(), codes, side);
}

template <class T, class Code>
void decode_codes(const Code* codes, int64_t n, const T* side, const SortQuantOptions& o, T* out) {
  const int64_t shift = shift_of(o.q, o.s);
  const int64_t mask = (int64_t{1} << o.q) - 1;
  const int64_t groups = int64_t{1} << o.s;
  const bool skip_zero = o.reference_decoder && shift == 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t u = static_cast<int64_t>(codes[k]) + shift;
    const int64_t g = std::clamp<int64_t>(u >> o.q, 0, groups - 1);
    out[k] = skip_zero && codes[k] == 0 ? T(0) : static_cast<T>(u & mask) * side[2 * g + 1] + side[2 * g];
  }
}

class SortQuant : public CodecWith<SortQuant, SortQuantOptions> {
 public:
  using CodecWith::CodecWith;
  int parts() const override { return 2; }

  std::vector<at::Tensor> encode(const at::Tensor& x0, const CodecCall&) override {
    const at::Tensor x = kernel_values(x0.detach()).contiguous();
    const at::ScalarType code_type = options_.q + options_.s <= 8 ? at::kChar : at::kShort;
    at::Tensor codes = at::empty(x.sizes(), at::TensorOptions().dtype(code_type));
    at::Tensor side = at::empty({int64_t{1} << options_.s, 2}, x.options());
    const int64_t batch = x.dim() > 0 ? x.size(0) : 1;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sort_quant", [&] {
      const auto* v = x.data_ptr<scalar_t>();
      auto* sd = side.data_ptr<scalar_t>();
      if (code_type == at::kChar) {
        auto* c = codes.data_ptr<int8_t>();
        options_.fast ? encode_fast(v, x.numel(), batch, options_, c, sd) : encode_exact(v, x.numel(), options_, c, sd);
      } else {
        auto* c = codes.data_ptr<int16_t>();
        options_.fast ? encode_fast(v, x.numel(), batch, options_, c, sd) : encode_exact(v, x.numel(), options_, c, sd);
      }
    });
    return {codes, side};
  }

  at::Tensor decode(const std::vector<at::Tensor>& parts, at::IntArrayRef shape, at::ScalarType dtype,
                    const CodecCall&) override {
    const at::Tensor& codes = parts.at(0);
    const at::Tensor side = parts.at(1).contiguous();
    at::Tensor out = at::empty(shape, side.options());
    AT_DISPATCH_FLOATING_TYPES(side.scalar_type(), "sort_quant_decode", [&] {
      if (codes.scalar_type() == at::kChar) {
        decode_codes(codes.data_ptr<int8_t>(), codes.numel(), side.data_ptr<scalar_t>(), options_, out.data_ptr<scalar_t>());
      } else {
        decode_codes(codes.data_ptr<int16_t>(), codes.numel(), side.data_ptr<scalar_t>(), options_, out.data_ptr<scalar_t>());
      }
    });
    return out.to(dtype);
  }
};

}  // namespace

PIPELAB_REGISTER(Codec, SortQuant, "sort_quant",
                 "gpipe_test's sort quantization: 2^s groups by rank, 2^q levels each; int8/int16 codes + (min, step) "
                 "per group");

}  // namespace pipelab
