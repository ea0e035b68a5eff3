#include "models/sequential_layers.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/modules/transformerlayer.h>

#include <fmt/format.h>

#include <functional>
#include <map>

#include "core/config/fields.h"
#include "core/nn/batch_norm.h"
#include "core/nn/dropout.h"
#include "core/util/names.h"
#include "models/sequential_options.h"

namespace pipelab::models {
namespace {

using torch::nn::AnyModule;
using namespace layer_options;

// ---- modules that PyTorch's nn.Sequential holds as they are, or nearly -----------------

/// A module whose parameters, buffers and children are another's, under the same names, with
/// a forward that takes and gives one tensor: LSTM/GRU (output only), attention (self, batch
/// first), transformer layer (batch first). The matching Python layer is a subclass with
/// that forward, so a state dict moves between them unchanged.
class AdoptedImpl : public torch::nn::Module {
 public:
  AdoptedImpl(const std::shared_ptr<torch::nn::Module>& inner, std::function<at::Tensor(const at::Tensor&)> forward)
      : forward_(std::move(forward)) {
    for (const auto& p : inner->named_parameters(false)) register_parameter(p.key(), p.value());
    for (const auto& b : inner->named_buffers(false)) register_buffer(b.key(), b.value());
    for (const auto& c : inner->named_children()) register_module(c.key(), c.value());
    inner_ = inner;
  }
  at::Tensor forward(const at::Tensor& x) { return forward_(x); }

 private:
  std::shared_ptr<torch::nn::Module> inner_;
  std::function<at::Tensor(const at::Tensor&)> forward_;
};
TORCH_MODULE(Adopted);

/// Several layers as one block (nn.Sequential), adding the input back for `residual`.
class ChainImpl : public torch::nn::Module {
 public:
  ChainImpl(std::vector<AnyModule> layers, bool residual) : layers_(std::move(layers)), residual_(residual) {
    for (size_t j = 0; j < layers_.size(); ++j) register_module(std::to_string(j), layers_[j].ptr());
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = x;
    for (AnyModule& m : layers_) y = m.forward(y);
    return residual_ ? x + y : y;
  }

 private:
  std::vector<AnyModule> layers_;
  bool residual_;
};
TORCH_MODULE(Chain);

// ---- the table ------------------------------------------------------------------------

/// The input's channels (the first axis of an example) or features (its last).
int64_t channels(const LayerInput& in) { return in.shape.empty() ? 1 : in.shape.front(); }
int64_t features(const LayerInput& in) { return in.shape.empty() ? 1 : in.shape.back(); }

struct Kind {
  bool needs_options;  ///< cannot be written as a bare name
  std::function<AnyModule(const ConfigNode& options, const LayerInput& in)> make;
};

template <class O>
O opts(const ConfigNode& n) {
  return read_options<O>(n);
}

/// A layer without options: any key given is unknown.
struct NoOptions {
  template <class V>
  void fields(V&) {}
};
void none(const ConfigNode& n) { (void)opts<NoOptions>(n); }

AnyModule conv(const ConfigNode& n, const LayerInput& in, int dims) {
  const auto o = opts<ConvOptions>(n);
  if (dims == 1) {
    return AnyModule(torch::nn::Conv1d(torch::nn::Conv1dOptions(channels(in), o.out, o.kernel)
                                           .stride(o.stride)
                                           .padding(o.padding)
                                           .dilation(o.dilation)
                                           .groups(o.groups)
                                           .bias(o.bias)));
  }
  return AnyModule(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels(in), o.out, o.kernel)
                                         .stride(o.stride)
                                         .padding(o.padding)
                                         .dilation(o.dilation)
                                         .groups(o.groups)
                                         .bias(o.bias)));
}

AnyModule pool(const ConfigNode& n, const std::string& kind) {
  const auto o = opts<PoolOptions>(n);
  const bool adaptive = kind.rfind("adaptive", 0) == 0;
  if (adaptive && o.out.empty()) n.fail(kind + " needs its output size", "add out: [1, 1] (or [1] for 1-d)");
  if (!adaptive && o.kernel == 0) n.fail(kind + " needs its window", "add kernel: 2");
  const int64_t stride = o.stride ? o.stride : o.kernel;
  if (kind == "max_pool1d")
    return AnyModule(torch::nn::MaxPool1d(torch::nn::MaxPool1dOptions(o.kernel).stride(stride).padding(o.padding)));
  if (kind == "max_pool2d")
    return AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(o.kernel).stride(stride).padding(o.padding)));
  if (kind == "avg_pool1d")
    return AnyModule(torch::nn::AvgPool1d(torch::nn::AvgPool1dOptions(o.kernel).stride(stride).padding(o.padding)));
  if (kind == "avg_pool2d")
    return AnyModule(torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(o.kernel).stride(stride).padding(o.padding)));
  if (kind == "adaptive_avg_pool1d") return AnyModule(torch::nn::AdaptiveAvgPool1d(o.out.front()));
  if (o.out.size() != 2) n.child("out").fail("adaptive_avg_pool2d's size has two entries", "write out: [H, W]");
  return AnyModule(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({o.out[0], o.out[1]})));
}

AnyModule recurrent(const ConfigNode& n, const LayerInput& in, bool lstm) {
  const auto o = opts<RecurrentOptions>(n);
  if (lstm) {
    auto m = torch::nn::LSTM(torch::nn::LSTMOptions(features(in), o.hidden)
                                 .num_layers(o.layers)
                                 .batch_first(true)
                                 .bidirectional(o.bidirectional));
    return AnyModule(Adopted(m.ptr(), [m](const at::Tensor& x) mutable { return std::get<0>(m->forward(x)); }));
  }
  auto m = torch::nn::GRU(torch::nn::GRUOptions(features(in), o.hidden)
                              .num_layers(o.layers)
                              .batch_first(true)
                              .bidirectional(o.bidirectional));
  return AnyModule(Adopted(m.ptr(), [m](const at::Tensor& x) mutable { return std::get<0>(m->forward(x)); }));
}

AnyModule attention(const ConfigNode& n, const LayerInput& in, bool transformer) {
  const auto o = opts<AttentionOptions>(n);
  // LibTorch's layers take [T, N, E]; the examples here are [N, T, E] (batch first, as
  // Python's batch_first=True layers take them).
  if (!transformer) {
    auto m = torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(features(in), o.heads));
    return AnyModule(Adopted(m.ptr(), [m](const at::Tensor& x) mutable {
      const at::Tensor t = x.transpose(0, 1);
      return std::get<0>(m->forward(t, t, t, {}, false)).transpose(0, 1);
    }));
  }
  if (o.ff == 0)
    n.fail("transformer_encoder_layer needs its feed-forward width", "add ff: 2048 (4 x the width is usual)");
  auto options = torch::nn::TransformerEncoderLayerOptions(features(in), o.heads).dim_feedforward(o.ff).dropout(0);
  if (o.activation == "gelu") options.activation(torch::kGELU);
  auto m = torch::nn::TransformerEncoderLayer(options);
  return AnyModule(
      Adopted(m.ptr(), [m](const at::Tensor& x) mutable { return m->forward(x.transpose(0, 1)).transpose(0, 1); }));
}

const std::map<std::string, Kind>& kinds() {
  using N = const ConfigNode&;
  using I = const LayerInput&;
  static const std::map<std::string, Kind> table{
      {"linear",
       {true,
        [](N n, I in) {
          const auto o = opts<LinearOptions>(n);
          return AnyModule(torch::nn::Linear(torch::nn::LinearOptions(features(in), o.out).bias(o.bias)));
        }}},
      {"conv1d", {true, [](N n, I in) { return conv(n, in, 1); }}},
      {"conv2d", {true, [](N n, I in) { return conv(n, in, 2); }}},
      {"batch_norm",
       {false,
        [](N n, I in) {
          const auto o = opts<NormOptions>(n);
          return AnyModule(pipelab::nn::BatchNorm(pipelab::nn::BatchNormOptions{channels(in), o.eps, o.momentum}));
        }}},
      {"layer_norm",
       {false,
        [](N n, I in) {
          const auto o = opts<NormOptions>(n);
          return AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({features(in)}).eps(o.eps)));
        }}},
      {"group_norm",
       {true,
        [](N n, I in) {
          const auto o = opts<NormOptions>(n);
          if (o.groups == 0) n.fail("group_norm needs its number of groups", "add groups: 8");
          return AnyModule(torch::nn::GroupNorm(torch::nn::GroupNormOptions(o.groups, channels(in)).eps(o.eps)));
        }}},
      {"relu", {false, [](N n, I) { return none(n), AnyModule(torch::nn::ReLU()); }}},
      {"gelu", {false, [](N n, I) { return none(n), AnyModule(torch::nn::GELU()); }}},
      {"tanh", {false, [](N n, I) { return none(n), AnyModule(torch::nn::Tanh()); }}},
      {"sigmoid", {false, [](N n, I) { return none(n), AnyModule(torch::nn::Sigmoid()); }}},
      {"silu", {false, [](N n, I) { return none(n), AnyModule(torch::nn::SiLU()); }}},
      {"leaky_relu",
       {false,
        [](N n, I) {
          return AnyModule(
              torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(opts<LeakyOptions>(n).slope)));
        }}},
      {"dropout", {false, [](N n, I) { return AnyModule(pipelab::nn::Dropout(opts<DropoutOptions>(n).p)); }}},
      {"flatten",
       {false,
        [](N n, I) {
          return AnyModule(torch::nn::Flatten(torch::nn::FlattenOptions().start_dim(opts<FlattenOptions>(n).start)));
        }}},
      {"max_pool1d", {true, [](N n, I) { return pool(n, "max_pool1d"); }}},
      {"max_pool2d", {true, [](N n, I) { return pool(n, "max_pool2d"); }}},
      {"avg_pool1d", {true, [](N n, I) { return pool(n, "avg_pool1d"); }}},
      {"avg_pool2d", {true, [](N n, I) { return pool(n, "avg_pool2d"); }}},
      {"adaptive_avg_pool1d", {true, [](N n, I) { return pool(n, "adaptive_avg_pool1d"); }}},
      {"adaptive_avg_pool2d", {true, [](N n, I) { return pool(n, "adaptive_avg_pool2d"); }}},
      {"embedding",
       {true,
        [](N n, I) {
          const auto o = opts<EmbeddingOptions>(n);
          return AnyModule(torch::nn::Embedding(torch::nn::EmbeddingOptions(o.num, o.dim)));
        }}},
      {"lstm", {true, [](N n, I in) { return recurrent(n, in, true); }}},
      {"gru", {true, [](N n, I in) { return recurrent(n, in, false); }}},
      {"attention", {true, [](N n, I in) { return attention(n, in, false); }}},
      {"transformer_encoder_layer", {true, [](N n, I in) { return attention(n, in, true); }}},
  };
  return table;
}

bool is_chain(const std::string& kind) { return kind == "block" || kind == "residual"; }

std::vector<std::string> kind_names() {
  std::vector<std::string> names{"block", "residual"};
  for (const auto& kv : kinds()) names.push_back(kv.first);
  return names;
}

at::Tensor example(const LayerInput& in) {
  std::vector<int64_t> shape{2};
  shape.insert(shape.end(), in.shape.begin(), in.shape.end());
  return at::zeros(shape, in.integer ? at::kLong : at::kFloat);
}

}  // namespace

LayerSpec read_layer(const ConfigNode& n) {
  LayerSpec spec;
  spec.at = std::make_shared<ConfigNode>(n);
  const std::string fix = fmt::format(
      "write a layer as a name (relu) or a name with options (linear: {{out: 10}}); "
      "layers: {}",
      join(kind_names(), ", "));
  if (n.yaml().IsScalar()) {
    spec.kind = n.text();
    spec.options = std::make_shared<ConfigNode>(YAML::Node(YAML::NodeType::Map), n.source(), n.path());
  } else if (n.yaml().IsMap() && n.yaml().size() == 1) {
    spec.kind = n.keys().front();
    spec.options = std::make_shared<ConfigNode>(n.child(spec.kind));
  } else {
    n.fail("a layer is one name, or one name with its options", fix);
  }
  if (is_chain(spec.kind)) {
    const ConfigNode& list = *spec.options;
    if (!list.yaml().IsSequence() || list.yaml().size() == 0) {
      n.fail(fmt::format("{} takes a list of layers", spec.kind),
             fmt::format("write {}: [linear: {{out: 8}}, relu]", spec.kind));
    }
    spec.children = ConfigValue<std::vector<LayerSpec>>::read(list);
    return spec;
  }
  const auto it = kinds().find(spec.kind);
  if (it == kinds().end()) {
    n.fail(fmt::format("'{}' is not a layer pipelab knows", spec.kind),
           fmt::format("use one of: {}", join(closest_first(spec.kind, kind_names()), ", ")));
  }
  if (it->second.needs_options && n.yaml().IsScalar()) {
    n.fail(fmt::format("{} needs options", spec.kind),
           fmt::format("write {}: {{...}}; `pipelab list model` shows them", spec.kind));
  }
  // Read the options once here, so that a mistake is reported when the file is read; what
  // only the real input can settle (shapes, divisibility) is infer_output's to report.
  try {
    (void)make_layer(spec, LayerInput{{1}, false});
  } catch (const c10::Error&) {
  }
  return spec;
}

AnyModule make_layer(const LayerSpec& spec, const LayerInput& in) {
  if (!is_chain(spec.kind)) return kinds().at(spec.kind).make(*spec.options, in);
  std::vector<AnyModule> layers;
  LayerInput next = in;
  for (const LayerSpec& child : spec.children) {
    layers.push_back(make_layer(child, next));
    if (&child != &spec.children.back()) next = infer_output(child, next);
  }
  return AnyModule(Chain(std::move(layers), spec.kind == "residual"));
}

LayerInput infer_output(const LayerSpec& spec, const LayerInput& in) {
  if (spec.kind == "residual") {  // x + f(x) needs f to keep the shape
    LayerInput body = in;
    for (const LayerSpec& child : spec.children) body = infer_output(child, body);
    if (body.shape != in.shape) {
      spec.at->fail(fmt::format("the residual's layers turn {} into {}, so x + f(x) does not add",
                                shape_text(in.shape), shape_text(body.shape)),
                    "keep the shape inside a residual");
    }
    return body;
  }
  at::Tensor y;
  try {
    AnyModule m = make_layer(spec, in);
    m.ptr()->eval();
    at::NoGradGuard no_grad;
    y = m.forward(example(in));
  } catch (const c10::Error& e) {
    spec.at->fail(fmt::format("{} cannot take examples of shape {}{}: {}", spec.kind, shape_text(in.shape),
                              in.integer ? " (token ids)" : "", e.what_without_backtrace()),
                  "change this layer or the ones before it so that the shapes fit");
  }
  return {std::vector<int64_t>(y.sizes().begin() + 1, y.sizes().end()), !y.is_floating_point()};
}

void check_logits(const LayerSpec& last, const LayerInput& out, const DataSpec& data) {
  std::vector<int64_t> want = data.target_shape;
  want.push_back(data.classes);
  if (out.shape == want && !out.integer) return;
  last.at->fail(
      fmt::format("the model ends with examples of shape {}, but the loss takes logits of shape {} ({} "
                  "classes{})",
                  shape_text(out.shape), shape_text(want), data.classes,
                  data.target_shape.empty() ? "" : " per position"),
      fmt::format("end with a layer that gives {}, e.g. linear: {{out: {}}}", shape_text(want), data.classes));
}

}  // namespace pipelab::models
