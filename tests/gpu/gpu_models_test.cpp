// Every registered model's forward and backward on cuda:0 agrees with the CPU: float64 to a
// relative 1e-9 (what the issue asks of a correct port: only summation order differs), and
// float32 to a relative 1e-3 with TF32 off (cuDNN and cuBLAS pick other algorithms than
// the CPU's, and batch norm over 4 examples amplifies rounding in deep stacks).
//
// Dropout is switched off in both copies: its masks come from each device's own generator
// (Philox on CUDA, mt19937 on the CPU), so they differ by design. Batch norm runs in
// training mode (batch statistics), which is where the two devices' kernels differ most.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/config/registry.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/zoo.h"

namespace pipelab::gpu_models_test {
namespace {

struct ModelCase {
  std::string section;
  DataSpec data;
  int64_t vocabulary = 0;  ///< token ids in [0, vocabulary) for text models
};

DataSpec tokens(int64_t length) {
  DataSpec d;
  d.input_shape = {length};
  d.classes = 2;
  d.integer_input = true;
  return d;
}

/// Token ids and a target token per position (a causal language model's data).
DataSpec lm_tokens(int64_t length, int64_t vocabulary) {
  DataSpec d = tokens(length);
  d.target_shape = {length};
  d.classes = vocabulary;
  return d;
}

/// One small configuration per registered model (every block kind each model has).
const std::map<std::string, ModelCase>& cases() {
  static const std::map<std::string, ModelCase> c{
      {"mlp", {"{type: mlp, sizes: [48, 64, 64, 10], dropout: 0.2, batch_norm: true}", {{48}, 10, false}}},
      {"cnn", {"{type: cnn, channels: [8, 16], hidden: 32, batch_norm: true, dropout: 0.2}", testing::images(1, 28, 28, 10)}},
      {"resnet", {R"({type: resnet, architecture: "16,1/32,1", unit: bottleneck})", testing::images(3, 32, 32, 10)}},
      {"vgg16", {"{type: vgg16}", testing::images(3, 32, 32, 10)}},
      {"densenet121", {"{type: densenet121, blocks: [2, 2, 2, 2], growth: 8}", testing::images(3, 32, 32, 10)}},
      {"googlenet", {"{type: googlenet}", testing::images(3, 32, 32, 10)}},
      {"mobilenet_v2", {"{type: mobilenet_v2, width: 0.5}", testing::images(3, 32, 32, 10)}},
      {"inception_v3", {"{type: inception_v3}", testing::images(3, 75, 75, 10)}},
      {"amoebanet_d", {"{type: amoebanet_d, layers: 3, filters: 16}", testing::images(3, 32, 32, 10)}},
      {"unet", {"{type: unet, depth: 2, channels: 8}", testing::images(3, 16, 16, 10)}},
      {"transformer", {"{type: transformer, num_words: 500, d_model: 32, heads: 4, ff: 32, layers: 2}", tokens(24), 500}},
      {"residual_lstm", {"{type: residual_lstm, num_words: 500, d_model: 32, hidden: 32, layers: 2}", tokens(24), 500}},
      {"llama",
       {"{type: llama, vocab: 500, hidden: 32, intermediate: 48, layers: 2, heads: 4, kv_heads: 2}", lm_tokens(24, 500),
        500}},
      {"roberta",
       {"{type: roberta, vocab: 500, hidden: 32, layers: 2, heads: 4, intermediate: 64, max_positions: 40}", tokens(24),
        500}},
      {"sequential",
       {"{type: sequential, layers: [conv2d: {out: 8, kernel: 3, padding: 1}, batch_norm, relu, "
        "block: [max_pool2d: {kernel: 2}, flatten], residual: [linear: {out: 512}, gelu, layer_norm], dropout: {p: 0.2}, "
        "linear: {out: 10}]}",
        testing::images(3, 16, 16, 10)}},
  };
  return c;
}

/// Training mode with every dropout module off.
void train_without_dropout(std::vector<Block>& blocks) {
  for (Block& b : blocks) {
    b.module.ptr()->train(true);
    for (const auto& m : b.module.ptr()->modules()) {
      if (m->name().find("Dropout") != std::string::npos) m->eval();
    }
  }
}

/// Output, loss and every parameter's gradient of one forward/backward on `device`.
struct Pass {
  at::Tensor output, loss;
  std::map<std::string, at::Tensor> grads;
};

Pass run(const ModelDef& def, std::vector<Block>& blocks, const at::Tensor& x, const at::Tensor& y,
         const c10::Device& device, at::ScalarType dtype) {
  for (Block& b : blocks) b.module.ptr()->to(device, dtype);
  train_without_dropout(blocks);
  at::Tensor h = x.to(device);
  if (!h.is_floating_point()) {
    // token ids stay int64
  } else {
    h = h.to(dtype);
  }
  LiveSet live(h);  // several tensors between blocks (amoebanet_d, unet): core/model/block_io.h
  for (Block& b : blocks) live.run(b);
  h = live.get("x");
  Pass p;
  p.output = h.detach().to(at::kCPU, at::kDouble);
  const at::Tensor loss = def.loss->compute(h, y.to(device));
  torch::autograd::backward({loss});
  p.loss = loss.detach().to(at::kCPU, at::kDouble);
  for (Block& b : blocks) {
    for (const auto& kv : b.module.ptr()->named_parameters()) {
      if (kv.value().grad().defined()) p.grads[b.name + "." + kv.key()] = kv.value().grad().to(at::kCPU, at::kDouble);
    }
  }
  return p;
}

double relative(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.norm().item<double>(), 1e-30);
  return (a - b).norm().item<double>() / scale;
}

/// One forward/backward of model `name` in `dtype` on `device`, from the same weights and
/// the same batch every time.
Pass model_pass(const std::string& name, const c10::Device& device, at::ScalarType dtype) {
  const ModelCase& c = cases().at(name);
  const ModelDef def = testing::define_model(c.section, c.data);
  std::vector<Block> blocks = testing::build_model(def);
  std::vector<int64_t> shape{4};
  shape.insert(shape.end(), c.data.input_shape.begin(), c.data.input_shape.end());
  at::manual_seed(7);
  const at::Tensor x = c.data.integer_input ? at::randint(c.vocabulary, shape, at::kLong) : at::randn(shape, at::kDouble);
  std::vector<int64_t> target{4};
  target.insert(target.end(), c.data.target_shape.begin(), c.data.target_shape.end());
  const at::Tensor y = at::randint(c.data.classes, target, at::kLong);
  return run(def, blocks, x, y, device, dtype);
}

/// The largest of the relative differences between two passes: of the output, of the loss,
/// and of all parameter gradients taken together (one vector: a gradient that is zero in
/// exact arithmetic, such as a bias just before batch norm or an attention key's bias, is
/// rounding noise on both devices and has no meaningful relative error of its own).
double difference(const std::string& name, const Pass& a, const Pass& b) {
  EXPECT_EQ(a.grads.size(), b.grads.size()) << name;
  double diff = 0, norm = 0;
  for (const auto& [param, g] : a.grads) {
    const auto it = b.grads.find(param);
    if (it == b.grads.end()) {
      ADD_FAILURE() << name << ": no gradient for " << param << " in one of the passes";
      continue;
    }
    diff += std::pow((it->second - g).norm().item<double>(), 2);
    norm += std::pow(g.norm().item<double>(), 2);
  }
  return std::max({relative(b.output, a.output), relative(b.loss, a.loss), std::sqrt(diff / std::max(norm, 1e-300))});
}

TEST(GpuModels, EveryRegisteredModelHasACase) {
  // Not skipped without a GPU: a new model must come with its GPU case.
  for (const std::string& name : Registry<ModelFactory>::get().names()) {
    if (name.rfind("test_", 0) == 0) continue;  // a model the tests register for an oracle
    // A TorchScript module comes from a file Python writes (tests/models/torchscript_model_test.cpp
    // trains one on the CPU); its GPU numerics are LibTorch's interpreter's.
    if (name == "torchscript") continue;
    EXPECT_TRUE(cases().count(name)) << "model '" << name << "' has no case in tests/gpu/gpu_models_test.cpp";
  }
}

class GpuModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModel, ForwardBackwardMatchesCpuFloat64) {
  PIPELAB_REQUIRE_GPU();
  const c10::Device gpu(c10::kCUDA, 0);
  const double d = difference(GetParam(), model_pass(GetParam(), c10::kCPU, at::kDouble),
                              model_pass(GetParam(), gpu, at::kDouble));
  std::cout << "[ figure ] " << GetParam() << " float64 relative difference " << d << "\n";
  EXPECT_LT(d, 1e-9);
}

// In float32 both devices round; how much depends on the model (batch norm over 4 examples
// divides by small deviations, and deep nets amplify that). The GPU's error against the
// float64 result must be about the CPU's own float32 error, or below 1e-3.
TEST_P(GpuModel, ForwardBackwardMatchesCpuFloat32WithoutTf32) {
  PIPELAB_REQUIRE_GPU();
  device::set_allow_tf32(false, false);
  const Pass exact = model_pass(GetParam(), c10::kCPU, at::kDouble);
  const double gpu = difference(GetParam(), exact, model_pass(GetParam(), c10::Device(c10::kCUDA, 0), at::kFloat));
  const double cpu = difference(GetParam(), exact, model_pass(GetParam(), c10::kCPU, at::kFloat));
  std::cout << "[ figure ] " << GetParam() << " float32 relative error against float64: GPU " << gpu << ", CPU " << cpu
            << "\n";
  EXPECT_LT(gpu, std::max(1e-3, 10 * cpu));
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& kv : cases()) names.push_back(kv.first);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuModel, ::testing::ValuesIn(model_names()));

}  // namespace
}  // namespace pipelab::gpu_models_test
