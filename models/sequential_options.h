#pragma once
/// The options of the YAML model's layers (models/sequential_layers.cpp), one struct per
/// kind that takes any, read with the fields machinery (core/config/fields.h) so that a
/// wrong key or value names its line.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/config/fields.h"

namespace pipelab::models::layer_options {

struct LinearOptions {
  int64_t out = 0;
  bool bias = true;
  template <class V>
  void fields(V& v) {
    v.required("out", out, "output features", positive);
    v("bias", bias, "add a bias");
  }
};

struct ConvOptions {
  int64_t out = 0, kernel = 0, stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
  template <class V>
  void fields(V& v) {
    v.required("out", out, "output channels", positive);
    v.required("kernel", kernel, "kernel size", positive);
    v("stride", stride, "stride", positive);
    v("padding", padding, "zero padding on each side", non_negative);
    v("dilation", dilation, "dilation", positive);
    v("groups", groups, "groups", positive);
    v("bias", bias, "add a bias");
  }
};

struct NormOptions {
  double eps = 1e-5, momentum = 0.1;
  int64_t groups = 0;
  template <class V>
  void fields(V& v) {
    v("eps", eps, "added to the variance", positive);
    v("momentum", momentum, "batch norm: running statistics' momentum", in_range(0.0, 1.0));
    v("groups", groups, "group norm: number of groups (required there)", non_negative);
  }
};

struct PoolOptions {
  int64_t kernel = 0, stride = 0, padding = 0;
  std::vector<int64_t> out;
  template <class V>
  void fields(V& v) {
    v("kernel", kernel, "window size (required but for adaptive pooling)", non_negative);
    v("stride", stride, "stride (0: the kernel size)", non_negative);
    v("padding", padding, "padding", non_negative);
    v("out", out, "adaptive pooling: the output size, e.g. [1, 1]", each(positive));
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
    v("slope", slope, "negative slope");
  }
};

struct FlattenOptions {
  int64_t start = 1;
  template <class V>
  void fields(V& v) {
    v("start", start, "first dimension flattened (1: all but the batch)", positive);
  }
};

struct EmbeddingOptions {
  int64_t num = 0, dim = 0;
  template <class V>
  void fields(V& v) {
    v.required("num", num, "vocabulary size", positive);
    v.required("dim", dim, "embedding size", positive);
  }
};

struct RecurrentOptions {
  int64_t hidden = 0, layers = 1;
  bool bidirectional = false;
  template <class V>
  void fields(V& v) {
    v.required("hidden", hidden, "hidden size", positive);
    v("layers", layers, "stacked layers", positive);
    v("bidirectional", bidirectional, "run both directions (the output doubles)");
  }
};

struct AttentionOptions {
  int64_t heads = 0, ff = 0;
  std::string activation = "relu";
  double dropout = 0;
  template <class V>
  void fields(V& v) {
    v.required("heads", heads, "attention heads", positive);
    v("ff", ff, "transformer layer: feed-forward width (required there)", non_negative);
    v("activation", activation, "transformer layer: relu or gelu");
    v("dropout", dropout, "must be 0: see models/sequential_layers.cpp", in_half_open(0.0, 1.0));
  }
  void check(const ConfigNode& node) const {
    // LibTorch's attention and transformer layers draw their dropout from its global
    // generator, which pipelab's executors do not order: runs would not repeat.
    if (dropout > 0) {
      node.child("dropout").fail(
          "dropout inside attention is drawn from LibTorch's global generator, so runs would "
          "not repeat across executors",
          "set dropout: 0 and add dropout layers around it");
    }
    if (activation != "relu" && activation != "gelu") {
      node.child("activation").fail(fmt::format("'{}' is not relu or gelu", activation), "use relu or gelu");
    }
  }
};

}  // namespace pipelab::models::layer_options
