/// `mlp`: a multi-layer perceptron, one block per linear layer ("fc1", "fc2", ...), each
/// linear -> [batch norm] -> activation -> [dropout], the last one linear only. Inputs of
/// any shape are flattened by the first block. Default LibTorch initialisation (as
/// PyTorch's nn.Linear).
#include <torch/nn/modules/linear.h>

#include <numeric>

#include "core/config/bounds.h"
#include "core/model/model.h"
#include "core/nn/batch_norm.h"
#include "core/nn/dropout.h"
#include "core/util/memory_size.h"
#include "models/activation.h"

namespace pipelab::models {
namespace {

struct MlpOptions {
  std::vector<int64_t> sizes;
  Activation activation = Activation::Relu;
  double dropout = 0;
  bool batch_norm = false;
  template <class V>
  void fields(V& v) {
    v.required("sizes", sizes, "layer widths [inputs, hidden..., classes]", each(width_bound()));
    v.choice("activation", activation, activation_choices(), "activation after each hidden layer");
    v("dropout", dropout, "dropout after each hidden activation", in_half_open(0, 1));
    v("batch_norm", batch_norm, "batch norm after each hidden linear layer");
  }
  void check(const ConfigNode& node) const {
    if (sizes.size() < 2) node.child("sizes").fail("needs at least [inputs, classes]", "list at least two widths");
    // Weights, their gradient and an optimizer state or two: four float32 copies at least.
    double weights = 0;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) weights += static_cast<double>(sizes[i]) * static_cast<double>(sizes[i + 1]);
    const std::string problem = memory_problem(weights * 4 * 4);
    if (!problem.empty()) {
      node.child("sizes").fail(fmt::format("these widths make {:.3g} weights, which {}", weights, problem),
                               "use smaller widths");
    }
  }
};

/// flatten? -> linear -> [bn] -> [activation] -> [dropout]
class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in, int64_t out, bool flatten, bool hidden, const MlpOptions& o) : flatten_(flatten) {
    linear_ = register_module("linear", torch::nn::Linear(in, out));
    if (hidden && o.batch_norm) bn_ = register_module("bn", nn::BatchNorm(out));
    if (hidden) activation_ = make_activation(o.activation);
    if (hidden && o.dropout > 0) dropout_ = register_module("dropout", nn::Dropout(o.dropout));
  }
  torch::Tensor forward(torch::Tensor x) {
    if (flatten_) x = x.flatten(1);
    x = linear_(x);
    if (bn_) x = bn_(x);
    if (!activation_.is_empty()) x = activation_.forward(x);
    if (dropout_) x = dropout_(x);
    return x;
  }

 private:
  bool flatten_;
  torch::nn::Linear linear_{nullptr};
  nn::BatchNorm bn_{nullptr};
  torch::nn::AnyModule activation_;
  nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Dense);

class Mlp : public Configured<ModelFactory, MlpOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    // The hidden layers at most 32 wide; the inputs and classes are the data's.
    Miniature m;
    std::vector<int64_t> sizes = options_.sizes;
    for (size_t i = 1; i + 1 < sizes.size(); ++i) sizes[i] = std::min<int64_t>(sizes[i], 32);
    if (sizes != options_.sizes) m.widths["sizes"] = YAML::Node(sizes);
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    const auto& sizes = options_.sizes;
    const int64_t inputs = std::accumulate(data.input_shape.begin(), data.input_shape.end(), int64_t{1},
                                           std::multiplies<int64_t>());
    if (sizes.front() != inputs) {
      fail("sizes", fmt::format("the first width is {}, but examples have {} features (shape {})", sizes.front(),
                                inputs, shape_text(data.input_shape)),
           fmt::format("start sizes with {}", inputs));
    }
    if (sizes.back() != data.classes) {
      fail("sizes", fmt::format("the last width is {}, but the dataset has {} classes", sizes.back(), data.classes),
           fmt::format("end sizes with {}", data.classes));
    }
    ModelDef def;
    const bool flatten = data.input_shape.size() != 1;
    const MlpOptions o = options_;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      const bool hidden = i + 2 < sizes.size();
      def.blocks.push_back({fmt::format("fc{}", i + 1), [=] {
                              return torch::nn::AnyModule(Dense(sizes[i], sizes[i + 1], flatten && i == 0, hidden, o));
                            }});
    }
    def.loss = std::make_shared<CrossEntropyLoss>();
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Mlp, "mlp", "multi-layer perceptron, one block per linear layer");
}
