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
#include "core/util/memory_size.h"
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

/// Refuses a layer of `weights` weights that this machine could not train (the weights, their
/// gradients and an optimizer state or two: four float32 copies), before LibTorch allocates it.
void check_fits(const ConfigNode& n, const std::string& kind, double weights) {
  const std::string problem = memory_problem(weights * 4 * 4);
  if (!problem.empty()) {
    n.fail(fmt::format("this {} has {:.3g} weights, which {}", kind, weights, problem), "make it smaller");
  }
}

/// The options of a layer with weights, checked against the machine for input size `in`.
template <class O, class... Extra>
O sized(const ConfigNode& n, const std::string& kind, double in, Extra... extra) {
  O o = opts<O>(n);
  check_fits(n, kind, o.weights(in, extra...));
  return o;
}

/// A layer without options: any key given is unknown.
struct NoOptions {
  template <class V>
  void fields(V&) {}
};
void none(const ConfigNode& n) { (void)opts<NoOptions>(n); }

AnyModule conv(const ConfigNode& n, const LayerInput& in, int dims) {
  const auto o = sized<ConvOptions>(n, dims == 1 ? "conv1d" : "conv2d", static_cast<double>(channels(in)), dims);
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
  const auto o = opts<WindowPoolOptions>(n);
  const int64_t stride = o.stride ? o.stride : o.kernel;
  if (kind == "max_pool1d")
    return AnyModule(torch::nn::MaxPool1d(torch::nn::MaxPool1dOptions(o.kernel).stride(stride).padding(o.padding)));
  if (kind == "max_pool2d")
    return AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(o.kernel).stride(stride).padding(o.padding)));
  if (kind == "avg_pool1d")
    return AnyModule(torch::nn::AvgPool1d(torch::nn::AvgPool1dOptions(o.kernel).stride(stride).padding(o.padding)));
  return AnyModule(torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(o.kernel).stride(stride).padding(o.padding)));
}

AnyModule adaptive_pool(const ConfigNode& n, int dims) {
  const auto o = opts<AdaptivePoolOptions>(n);
  if (o.out.size() != static_cast<size_t>(dims)) {
    n.child("out").fail(fmt::format("adaptive_avg_pool{}d's size has {} entr{}", dims, dims, dims == 1 ? "y" : "ies"),
                        dims == 1 ? "write out: [L]" : "write out: [H, W]");
  }
  if (dims == 1) return AnyModule(torch::nn::AdaptiveAvgPool1d(o.out.front()));
  return AnyModule(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({o.out[0], o.out[1]})));
}

AnyModule recurrent(const ConfigNode& n, const LayerInput& in, bool lstm) {
  const auto o = sized<RecurrentOptions>(n, lstm ? "lstm" : "gru", static_cast<double>(features(in)), lstm ? 4 : 3);
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

/// Attention takes sequences, [T, E] per example, and LibTorch asserts (an internal assert)
/// where the heads do not divide the width E.
void check_heads(const ConfigNode& n, const LayerInput& in, int64_t heads) {
  if (in.stand_in) return;
  if (in.shape.size() != 2 || in.integer) {
    n.fail(fmt::format("attention takes sequences of vectors, [T, E] per example, and the examples that reach it are "
                       "{}{}",
                       in.integer ? "token ids " : "", shape_text(in.shape)),
           in.integer ? "put an embedding before it" : "give it [T, E] examples (an embedding of token ids, say)");
  }
  const int64_t width = features(in);
  if (width % heads != 0) {
    n.child("heads").fail(fmt::format("{} heads do not divide the width {} of the examples that reach it", heads, width),
                          "use a number of heads that divides the width");
  }
}

AnyModule attention(const ConfigNode& n, const LayerInput& in) {
  const int64_t e = features(in);
  const auto o = sized<AttentionOptions>(n, "attention", static_cast<double>(e));
  check_heads(n, in, o.heads);
  // LibTorch's layers take [T, N, E]; the examples here are [N, T, E] (batch first, as
  // Python's batch_first=True layers take them).
  auto m = torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(e, o.heads));
  return AnyModule(Adopted(m.ptr(), [m](const at::Tensor& x) mutable {
    const at::Tensor t = x.transpose(0, 1);
    return std::get<0>(m->forward(t, t, t, {}, false)).transpose(0, 1);
  }));
}

AnyModule transformer_layer(const ConfigNode& n, const LayerInput& in) {
  const int64_t e = features(in);
  const auto o = sized<TransformerLayerOptions>(n, "transformer_encoder_layer", static_cast<double>(e));
  check_heads(n, in, o.heads);
  auto options = torch::nn::TransformerEncoderLayerOptions(e, o.heads).dim_feedforward(o.ff).dropout(0);
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
          const auto o = sized<LinearOptions>(n, "linear", static_cast<double>(features(in)));
          return AnyModule(torch::nn::Linear(torch::nn::LinearOptions(features(in), o.out).bias(o.bias)));
        }}},
      {"conv1d", {true, [](N n, I in) { return conv(n, in, 1); }}},
      {"conv2d", {true, [](N n, I in) { return conv(n, in, 2); }}},
      {"batch_norm",
       {false,
        [](N n, I in) {
          const auto o = opts<BatchNormOptions>(n);
          return AnyModule(pipelab::nn::BatchNorm(pipelab::nn::BatchNormOptions{channels(in), o.eps, o.momentum}));
        }}},
      {"layer_norm",
       {false,
        [](N n, I in) {
          const auto o = opts<LayerNormOptions>(n);
          return AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({features(in)}).eps(o.eps)));
        }}},
      {"group_norm",
       {true,
        [](N n, I in) {
          const auto o = opts<GroupNormOptions>(n);
          if (!in.stand_in && channels(in) % o.groups != 0) {
            n.child("groups").fail(fmt::format("{} groups do not divide the {} channels that reach it", o.groups,
                                               channels(in)),
                                   "use a number of groups that divides the channels");
          }
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
      {"adaptive_avg_pool1d", {true, [](N n, I) { return adaptive_pool(n, 1); }}},
      {"adaptive_avg_pool2d", {true, [](N n, I) { return adaptive_pool(n, 2); }}},
      {"embedding",
       {true,
        [](N n, I) {
          const auto o = sized<EmbeddingOptions>(n, "embedding", 0);
          return AnyModule(torch::nn::Embedding(torch::nn::EmbeddingOptions(o.num, o.dim)));
        }}},
      {"lstm", {true, [](N n, I in) { return recurrent(n, in, true); }}},
      {"gru", {true, [](N n, I in) { return recurrent(n, in, false); }}},
      {"attention", {true, [](N n, I in) { return attention(n, in); }}},
      {"transformer_encoder_layer", {true, [](N n, I in) { return transformer_layer(n, in); }}},
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
    (void)make_layer(spec, LayerInput{{1}, false, true});
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

LayerInput infer_output(const LayerSpec& spec, const LayerInput& in, double* weights) {
  if (spec.kind == "residual") {  // x + f(x) needs f to keep the shape and the kind of values
    LayerInput body = in;
    for (const LayerSpec& child : spec.children) body = infer_output(child, body, weights);
    if (body.shape != in.shape) {
      spec.at->fail(fmt::format("the residual's layers turn {} into {}, so x + f(x) does not add",
                                shape_text(in.shape), shape_text(body.shape)),
                    "keep the shape inside a residual");
    }
    if (body.integer != in.integer) {
      spec.at->fail(fmt::format("the residual's layers turn {} into {}, so x + f(x) would add {}",
                                in.integer ? "token ids" : "values", body.integer ? "token ids" : "values",
                                in.integer ? "the ids to the values" : "values to ids"),
                    "put the embedding before the residual, so that it adds values to values");
    }
    return body;
  }
  at::Tensor y;
  try {
    AnyModule m = make_layer(spec, in);
    if (weights) {
      for (const at::Tensor& p : m.ptr()->parameters()) *weights += static_cast<double>(p.numel());
    }
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
