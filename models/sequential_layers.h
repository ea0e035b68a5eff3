#pragma once
/// The layers of a YAML model (models/sequential.cpp): how an entry is read, what module it
/// makes for a given input, and what it gives. One row per layer kind in
/// sequential_layers.cpp; the modules are LibTorch's (pipelab's own batch norm and dropout,
/// whose randomness and statistics every executor reproduces), named as PyTorch names them.
#include <torch/nn/modules/container/any.h>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config/config_node.h"
#include "core/config/value.h"
#include "core/model/model.h"

namespace pipelab::models {

/// The most entries a list of layers may have (the model's, or a block's): each is built as
/// it is read, so the bound is checked first (docs/models.md, "Bounds").
inline constexpr size_t kMaxLayerEntries = 16384;

/// One entry of `layers`: `relu`, `linear: {out: 10}`, or `block:` / `residual:` with a list.
struct LayerSpec {
  std::string kind;
  /// Where the entry is written, and its options (an empty map for a bare name).
  std::shared_ptr<const ConfigNode> at, options;
  std::vector<LayerSpec> children;  ///< block and residual
};

/// What reaches a layer: one example's shape (no batch axis), and whether it is token ids.
struct LayerInput {
  std::vector<int64_t> shape;
  bool integer = false;
  /// A stand-in while the file is read (the options are checked, the shapes wait for the data).
  bool stand_in = false;
};

/// Reads one entry (kind checked against the table, options read and checked).
LayerSpec read_layer(const ConfigNode& n);

/// The module of `spec` for input `in`.
torch::nn::AnyModule make_layer(const LayerSpec& spec, const LayerInput& in);

/// What `spec` gives for input `in`, found by running a batch of two zero examples through a
/// fresh module (eval mode); an input the layer cannot take is a ConfigError at the layer.
/// Adds the module's weights to `*weights` when given.
LayerInput infer_output(const LayerSpec& spec, const LayerInput& in, double* weights = nullptr);

/// The model's output must be the logits the loss takes: [classes] per example, or
/// [T, classes] for a target per position. A ConfigError at the last layer otherwise.
void check_logits(const LayerSpec& last, const LayerInput& out, const DataSpec& data);

}  // namespace pipelab::models

namespace pipelab {

template <>
struct ConfigValue<models::LayerSpec> {
  static std::string type() { return "a layer"; }
  static models::LayerSpec read(const ConfigNode& n) { return models::read_layer(n); }
  static YAML::Node write(const models::LayerSpec& v) {
    if (!v.at->yaml().IsMap()) return YAML::Node(v.kind);  // written as a bare name
    YAML::Node out(YAML::NodeType::Map);
    out[v.kind] = v.options->yaml();
    return out;
  }
};

/// A list of layers, its length checked before any entry is read.
template <>
struct ConfigValue<std::vector<models::LayerSpec>> {
  static std::string type() { return "a list of layers"; }
  static std::vector<models::LayerSpec> read(const ConfigNode& n) {
    if (!n.yaml().IsSequence()) detail::fail_type(n, "a list of layers like [linear: {out: 10}, relu]");
    if (n.yaml().size() > models::kMaxLayerEntries) {
      n.fail(fmt::format("{} layers, more than the {} a list may have", n.yaml().size(), models::kMaxLayerEntries),
             "use fewer layers (a layer with more weights, or a block of several)");
    }
    std::vector<models::LayerSpec> out;
    for (size_t i = 0; i < n.yaml().size(); ++i) {
      out.push_back(models::read_layer(ConfigNode(n.yaml()[i], n.source(), fmt::format("{}[{}]", n.path(), i))));
    }
    return out;
  }
  static YAML::Node write(const std::vector<models::LayerSpec>& v) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const models::LayerSpec& x : v) out.push_back(ConfigValue<models::LayerSpec>::write(x));
    out.SetStyle(YAML::EmitterStyle::Flow);
    return out;
  }
};

}  // namespace pipelab
