// The models that landed after the second GPU session (docs/gpu.md) take one whole GPipe
// step (2 stages, 2 micro-batches, through the Runner) on cuda:0 and end with the CPU's
// float64 weights to 1e-6: roberta, densenet121 with torchvision's ImageNet stem, the YAML
// `sequential` model and a TorchScript module scripted by Python. Dropout is off where the
// model lets it be (each device draws its masks from its own generator); torchvision's
// GoogLeNet keeps its fixed dropout before the fc, so on it the step is only checked to run
// and stay finite on both devices.
#include <ATen/ATen.h>

#include "core/io/pt_file.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"

namespace pipelab::gpu_new_models_test {
namespace {

/// One GPipe step of `model` on `data` in float64 (the batch is the whole training set).
std::string experiment(const std::string& model, const std::string& data, int64_t batch) {
  return fmt::format(R"(
model:     {}
dataset:   {}
partition: {{stages: 2}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: sgd, lr: 0.05, momentum: 0.9}}
run:       {{epochs: 1, batch_size: {}, seed: 0, dtype: float64}}
)",
                     model, data, batch);
}

/// Final weights after one step on the CPU and on cuda:0.
std::pair<TensorDict, TensorDict> both(const std::string& yaml) {
  const TensorDict cpu = testing::train(yaml, {"run.devices=[cpu]"});
  const TensorDict gpu = testing::train(yaml, {"run.devices=[cuda:0]"});
  return {cpu, gpu};
}

bool finite(const TensorDict& d) {
  for (const auto& [name, t] : d) {
    if (!at::isfinite(t).all().item<bool>()) return false;
  }
  return !d.empty();
}

/// Token ids [n, length] in [0, vocabulary) and binary labels, as a tensors-dataset file.
std::string token_file(const testing::TempDir& dir, int64_t n, int64_t length, int64_t vocabulary) {
  at::manual_seed(5);
  const std::string path = dir.file("tokens.pt");
  save_tensor_dict(path, {{"x", at::randint(2, vocabulary, {n, length}, at::kLong)}, {"y", at::randint(2, {n}, at::kLong)}});
  return path;
}

const char* kImages = "{{type: synthetic, samples: 8, test_samples: 8, shape: [3, {0}, {0}], classes: 10}}";

struct Case {
  const char* name;
  std::string model;
  int64_t side;  ///< image side (0: a model of its own data)
};

class GpuNewModel : public ::testing::TestWithParam<Case> {};

TEST_P(GpuNewModel, OneGpipeStepEqualsTheCpuInFloat64) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  const Case& c = GetParam();
  const auto [cpu, gpu] = both(experiment(c.model, fmt::format(fmt::runtime(kImages), c.side), 8));
  const double d = testing::max_difference(cpu, gpu);
  std::cout << "[ figure ] " << c.name << " one GPipe step, float64, largest weight difference CPU/GPU " << d << "\n";
  EXPECT_LT(d, 1e-6) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, GpuNewModel,
    ::testing::Values(Case{"densenet121_imagenet_stem", "{type: densenet121, stem: imagenet, blocks: [2, 2, 2, 2], growth: 8}", 64},
                      Case{"sequential",
                           "{type: sequential, layers: [conv2d: {out: 8, kernel: 3, padding: 1}, batch_norm, relu, "
                           "block: [max_pool2d: {kernel: 2}, flatten], residual: [linear: {out: 512}, gelu, layer_norm], "
                           "linear: {out: 10}]}",
                           16}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(GpuNewModels, RobertaOneGpipeStepEqualsTheCpuInFloat64) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  testing::TempDir dir;
  const std::string data = fmt::format("{{type: tensors, path: {0}, test_path: {0}}}", token_file(dir, 8, 24, 500));
  const auto [cpu, gpu] = both(experiment(
      "{type: roberta, vocab: 500, hidden: 32, layers: 2, heads: 4, intermediate: 64, max_positions: 40, dropout: 0, "
      "attention_dropout: 0}",
      data, 8));
  const double d = testing::max_difference(cpu, gpu);
  std::cout << "[ figure ] roberta one GPipe step, float64, largest weight difference CPU/GPU " << d << "\n";
  EXPECT_LT(d, 1e-6);
}

TEST(GpuNewModels, TorchScriptOneGpipeStepEqualsTheCpuInFloat64) {
  PIPELAB_REQUIRE_GPU();
  if (testing::shell("python3 -c 'import torch' >/dev/null 2>&1").first != 0) GTEST_SKIP() << "no Python torch";
  testing::deterministic_cuda();
  testing::TempDir dir;
  const auto [rc, out] =
      testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/models/torchscript_model.py " + dir.file("py") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  const std::string py = dir.file("py");
  const auto [cpu, gpu] = both(experiment(fmt::format("{{type: torchscript, file: {}/children.pt}}", py),
                                          fmt::format("{{type: tensors, path: {0}/data.pt, test_path: {0}/data.pt}}", py), 32));
  const double d = testing::max_difference(cpu, gpu);
  std::cout << "[ figure ] torchscript one GPipe step, float64, largest weight difference CPU/GPU " << d << "\n";
  EXPECT_LT(d, 1e-6);
}

TEST(GpuNewModels, TorchvisionGoogLeNetTakesAGpipeStepOnBothDevices) {
  PIPELAB_REQUIRE_GPU();
  // torchvision's GoogLeNet has dropout 0.2 before its fc that no key switches off.
  const auto [cpu, gpu] = both(experiment("{type: googlenet, variant: torchvision}", fmt::format(fmt::runtime(kImages), 64), 8));
  EXPECT_TRUE(finite(cpu));
  EXPECT_TRUE(finite(gpu));
  EXPECT_EQ(cpu.size(), gpu.size());
}

}  // namespace
}  // namespace pipelab::gpu_new_models_test
