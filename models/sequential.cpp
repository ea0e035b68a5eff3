/// `sequential`: a model written in YAML, layer by layer, from LibTorch's modules — for a
/// researcher whose model is not in the zoo and who would rather not write C++.
///
///   model:
///     type: sequential
///     layers:
///       - conv2d: {out: 32, kernel: 3, padding: 1}
///       - batch_norm
///       - relu
///       - block: [max_pool2d: {kernel: 2}, flatten]     # several layers, one block
///       - residual: [linear: {out: 6272}, relu]         # x + f(x), one block
///       - linear: {out: 10}
///
/// Every entry is one block (the unit a partition cuts at). Parameters are named as a Python
/// `nn.Sequential` of the same layers names them — entry i's as "i.weight", a `block` or
/// `residual` entry's layer j as "i.j.weight" (an nn.Sequential, or a subclass whose forward
/// adds its input) — so a state dict saved from that Python model loads strictly. Input sizes
/// (in_features, channels, normalised shapes) are inferred from the data by running one
/// example through the layers as they are defined; every error names the layer's YAML line.
/// The layers themselves are in models/sequential_layers.h.
#include <fmt/format.h>

#include "core/model/model.h"
#include "core/util/memory_size.h"
#include "models/sequential_layers.h"

namespace pipelab::models {
namespace {

struct SequentialOptions {
  std::vector<LayerSpec> layers;
  template <class V>
  void fields(V& v) {
    v.required("layers", layers,
               "the layers in order: a name (relu), a name with options (linear: {out: 10}), or block: / residual: "
               "with a list of layers");
  }
  void check(const ConfigNode& node) const {
    if (layers.empty()) node.child("layers").fail("the model has no layers", "list at least one layer");
  }
};

class Sequential : public Configured<ModelFactory, SequentialOptions> {
 public:
  using Configured::Configured;
  ModelDef define(const DataSpec& data) const override {
    ModelDef def;
    // Walk the shapes once, building each layer with throwaway weights; the blocks are
    // built again under their own seeds when the run makes its stages.
    // Each layer was checked against the machine alone; their sum is checked as it grows.
    LayerInput in{data.input_shape, data.integer_input};
    double weights = 0;
    for (size_t i = 0; i < options_.layers.size(); ++i) {
      const LayerSpec& spec = options_.layers[i];
      def.blocks.push_back(BlockRecipe(std::to_string(i), [spec, in] { return make_layer(spec, in); }));
      in = infer_output(spec, in, &weights);
      const std::string problem = memory_problem(weights * 4 * 4);
      if (!problem.empty()) {
        spec.at->fail(fmt::format("the layers up to this one hold {:.3g} weights, which with their gradients and "
                                  "optimizer state {}",
                                  weights, problem),
                      "use fewer or smaller layers");
      }
    }
    check_logits(options_.layers.back(), in, data);
    def.loss = std::make_shared<CrossEntropyLoss>();
    return def;
  }
};

}  // namespace

PIPELAB_REGISTER(ModelFactory, Sequential, "sequential",
                 "a model written in YAML from LibTorch's layers, named as Python's nn.Sequential names them");

}  // namespace pipelab::models
