#pragma once
/// The options of the YAML model's layers (models/sequential_layers.cpp), one struct per
/// layer kind, read with the fields machinery (core/config/fields.h): a key the kind does not
/// use is an unknown key naming its line, as every options struct's is. Sizes and counts
/// have ceilings (docs/models.md) and each struct with weights estimates them from its input,
/// so an absurd layer is refused before LibTorch allocates it.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/config/bounds.h"

namespace pipelab::models::layer_options {

/// Window sizes, strides, paddings, dilations, heads: 2^16.
inline constexpr double kMaxSpan = 1 << 16;

inline InRange width() { return width_bound(); }
inline InRange span(double lo = 1) { return in_range(lo, kMaxSpan); }

struct LinearOptions {
  int64_t out = 0;
  bool bias = true;
  template <class V>
  void fields(V& v) {
    v.required("out", out, "output features", width());
    v("bias", bias, "add a bias");
  }
  double weights(double in) const { return in * static_cast<double>(out) + static_cast<double>(out); }
};

struct ConvOptions {
  int64_t out = 0, kernel = 0, stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
  template <class V>
  void fields(V& v) {
    v.required("out", out, "output channels", width());
    v.required("kernel", kernel, "kernel size", span());
    v("stride", stride, "stride", span());
    v("padding", padding, "zero padding on each side", span(0));
    v("dilation", dilation, "dilation", span());
    v("groups", groups, "groups", width());
  }
  double weights(double in, int dims) const {
    const double window = dims == 1 ? static_cast<double>(kernel) : static_cast<double>(kernel) * static_cast<double>(kernel);
    return in / static_cast<double>(groups) * static_cast<double>(out) * window + static_cast<double>(out);
  }
};

/// `eps`, which every normalisation takes.
template <class V>
void eps_field(V& v, double& eps) {
  v("eps", eps, "added to the variance", in_open_low(0, 1));
}

struct BatchNormOptions {
  double eps = 1e-5, momentum = 0.1;
  template <class V>
  void fields(V& v) {
    eps_field(v, eps);
    v("momentum", momentum, "running statistics' momentum", in_range(0.0, 1.0));
  }
};

struct LayerNormOptions {
  double eps = 1e-5;
  template <class V>
  void fields(V& v) {
    eps_field(v, eps);
  }
};

struct GroupNormOptions {
  double eps = 1e-5;
  int64_t groups = 0;
  template <class V>
  void fields(V& v) {
    v.required("groups", groups, "number of groups (they divide the channels)", width());
    eps_field(v, eps);
  }
};

/// max_pool and avg_pool, 1-d and 2-d.
struct WindowPoolOptions {
  int64_t kernel = 0, stride = 0, padding = 0;
  template <class V>
  void fields(V& v) {
    v.required("kernel", kernel, "window size", span());
    v("stride", stride, "stride (0: the kernel size)", span(0));
    v("padding", padding, "padding", span(0));
  }
};

/// adaptive_avg_pool, 1-d and 2-d.
struct AdaptivePoolOptions {
  std::vector<int64_t> out;
  template <class V>
  void fields(V& v) {
    v.required("out", out, "the output size, e.g. [1, 1] (or [1] for 1-d)", each(width()));
  }
};

struct DropoutOptions {
  double p = 0.5;
  template <class V>
  void fields(V& v) {
    v("p", p, "probability of dropping an element", in_half_open(0.0, 1.0));
  }
};

struct LeakyOptions {
  double slope = 0.01;
  template <class V>
  void fields(V& v) {
    v("slope", slope, "negative slope", in_range(-1e6, 1e6));
  }
};

struct FlattenOptions {
  int64_t start = 1;
  template <class V>
  void fields(V& v) {
    v("start", start, "first dimension flattened (1: all but the batch)", in_range(1, 64));
  }
};

struct EmbeddingOptions {
  int64_t num = 0, dim = 0;
  template <class V>
  void fields(V& v) {
    v.required("num", num, "vocabulary size", width());
    v.required("dim", dim, "embedding size", width());
  }
  double weights(double /*in*/) const { return static_cast<double>(num) * static_cast<double>(dim); }
};

/// lstm (4 gates) and gru (3).
struct RecurrentOptions {
  int64_t hidden = 0, layers = 1;
  bool bidirectional = false;
  template <class V>
  void fields(V& v) {
    v.required("hidden", hidden, "hidden size", width());
    v("layers", layers, "stacked layers", repeats_bound());
    v("bidirectional", bidirectional, "run both directions (the output doubles)");
  }
  double weights(double in, int gates) const {
    const double h = static_cast<double>(hidden), dirs = bidirectional ? 2 : 1;
    const double first = gates * (in * h + h * h + 2 * h);
    const double later = gates * (dirs * h * h + h * h + 2 * h);
    return dirs * (first + static_cast<double>(layers - 1) * later);
  }
};

/// Dropout inside LibTorch's attention layers would come from its global generator.
inline void check_attention_dropout(double dropout, const ConfigNode& node) {
  if (dropout > 0) {
    node.child("dropout").fail(
        "dropout inside attention is drawn from LibTorch's global generator, so runs would "
        "not repeat across executors",
        "set dropout: 0 and add dropout layers around it");
  }
}

struct AttentionOptions {
  int64_t heads = 0;
  double dropout = 0;
  template <class V>
  void fields(V& v) {
    v.required("heads", heads, "attention heads (they divide the width)", span());
    v("dropout", dropout, "must be 0: see models/sequential_layers.cpp", in_half_open(0.0, 1.0));
  }
  void check(const ConfigNode& node) const { check_attention_dropout(dropout, node); }
  double weights(double e) const { return 4 * e * e + 4 * e; }
};

struct TransformerLayerOptions {
  int64_t heads = 0, ff = 0;
  std::string activation = "relu";
  double dropout = 0;
  template <class V>
  void fields(V& v) {
    v.required("heads", heads, "attention heads (they divide the width)", span());
    v.required("ff", ff, "feed-forward width (4 x the width is usual)", width());
    v("activation", activation, "relu or gelu");
    v("dropout", dropout, "must be 0: see models/sequential_layers.cpp", in_half_open(0.0, 1.0));
  }
  void check(const ConfigNode& node) const {
    check_attention_dropout(dropout, node);
    if (activation != "relu" && activation != "gelu") {
      node.child("activation").fail(fmt::format("'{}' is not relu or gelu", activation), "use relu or gelu");
    }
  }
  double weights(double e) const {
    const double f = static_cast<double>(ff);
    return 4 * e * e + 4 * e + 2 * e * f + f + e + 4 * e;
  }
};

}  // namespace pipelab::models::layer_options
