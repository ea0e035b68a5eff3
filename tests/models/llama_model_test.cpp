// `llama`: a small random LlamaForCausalLM from `transformers` (tests/models/llama_model.py,
// run when Python's transformers is installed; 4 query heads over 2 key/value heads) loads
// from its safetensors with `init.names: huggingface`, strictly, gives its logits, and after
// 3 AdamW steps of a 2-stage GPipe holds its weights, float64, to 1e-10. Bad configurations
// and mismatched files are refused at their keys.
#include <gtest/gtest.h>

#include <map>

#include "core/io/pt_file.h"
#include "core/io/safetensors.h"
#include "core/model/tensor_names.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::llama_model_test {
namespace {

bool transformers_available() {
  static const bool available = testing::shell("python3 -c 'import transformers' >/dev/null 2>&1").first == 0;
  return available;
}

const char* const kModel =
    "{type: llama, vocab: 64, hidden: 32, intermediate: 48, layers: 2, heads: 4, kv_heads: 2, norm_eps: 1.0e-5}";

/// The reference's files in `dir`/hf (written once per test).
void write_reference(const testing::TempDir& dir) {
  const auto [rc, out] =
      testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/models/llama_model.py " + dir.file("hf") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
}

std::map<std::string, at::Tensor> tensors_of(const std::string& path) {
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : to_tensor_dict(load_pt(path), path)) out[kv.first] = kv.second;
  return out;
}

DataSpec tokens(int64_t length, int64_t vocab) {
  DataSpec data;
  data.input_shape = {length};
  data.integer_input = true;
  data.target_shape = {length};
  data.classes = vocab;
  return data;
}

TEST(LlamaModel, HuggingFacesCheckpointGivesItsLogits) {
  if (!transformers_available()) GTEST_SKIP() << "Python's transformers is not installed (tools/setup.sh --all installs it)";
  testing::TempDir dir;
  write_reference(dir);
  const ModelDef def = testing::define_model(kModel, tokens(12, 64));
  std::vector<Block> blocks = testing::build_model(def);
  for (Block& b : blocks) {
    b.module.ptr()->to(at::kDouble);
    b.module.ptr()->eval();
  }
  const std::string path = dir.file("hf/llama.safetensors");
  std::vector<std::string> dropped;
  testing::load_strictly(blocks, rename_tensors(load_weights(path), def.published_names.at("huggingface"), path, &dropped),
                         path);
  const at::Tensor expected = tensors_of(dir.file("hf/io.pt")).at("logits");
  const at::Tensor got = testing::forward(blocks, tensors_of(dir.file("hf/tokens.pt")).at("x"));
  ASSERT_EQ(got.sizes(), expected.sizes());
  const double error = (got - expected).abs().max().item<double>();
  std::printf("[ figure ] llama logits against transformers: largest difference %.3g (largest logit %.3g)\n", error,
              expected.abs().max().item<double>());
  EXPECT_LT(error, 1e-10);
  EXPECT_GT(expected.abs().max().item<double>(), 1e-2);
  // A file whose shapes are not the configuration's: each tensor named with both shapes, exit 2.
  testing::write_text(dir.file("e.yaml"), fmt::format(R"(
model:     {{type: llama, vocab: 64, hidden: 16, intermediate: 48, layers: 2, heads: 4, kv_heads: 2}}
dataset:   {{type: tensors, path: {0}, test_path: {0}}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: adamw, lr: 0.01}}
init:      {{from: {1}, names: huggingface}}
run:       {{epochs: 1, batch_size: 8}}
)",
                                                      dir.file("hf/tokens.pt"), path));
  const auto [rc, out] = testing::pipelab(fmt::format("run {} --set run.output={}", dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("embed.embed_tokens.weight (file [64, 32], model [64, 16])"), std::string::npos) << out;
}

TEST(LlamaModel, ThreeAdamWStepsOfATwoStageGPipeEqualTransformers) {
  if (!transformers_available()) GTEST_SKIP() << "Python's transformers is not installed (tools/setup.sh --all installs it)";
  testing::TempDir dir;
  write_reference(dir);
  // One mini-batch of all 8 sequences, 3 epochs: 3 updates from the same batch, as the
  // reference takes them; GPipe splits it into 2 micro-batches of 4.
  const std::string yaml = fmt::format(R"(
model:     {}
dataset:   {{type: tensors, path: {}, test_path: {}}}
partition: {{stages: 2}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: adamw, lr: 0.01, weight_decay: 0.01}}
init:      {{from: {}, names: huggingface}}
run:       {{epochs: 3, batch_size: 8, dtype: float64, seed: 0, threads: 1}}
)",
                                       kModel, dir.file("hf/tokens.pt"), dir.file("hf/tokens.pt"),
                                       dir.file("hf/llama.safetensors"));
  const TensorDict trained = testing::train(yaml);
  const ModelDef def = testing::define_model(kModel, tokens(12, 64));
  const std::string path = dir.file("hf/trained.safetensors");
  std::vector<std::string> dropped;
  std::map<std::string, at::Tensor> expected;
  for (const auto& [name, t] : rename_tensors(load_weights(path), def.published_names.at("huggingface"), path, &dropped)) {
    expected[name] = t;
  }
  ASSERT_EQ(trained.size(), expected.size());
  double worst = 0, moved = 0;
  const std::map<std::string, at::Tensor> initial = [&] {
    std::map<std::string, at::Tensor> m;
    const std::string start = dir.file("hf/llama.safetensors");
    for (const auto& [name, t] : rename_tensors(load_weights(start), def.published_names.at("huggingface"), start, &dropped)) {
      m[name] = t;
    }
    return m;
  }();
  for (const auto& [name, t] : trained) {
    ASSERT_TRUE(expected.count(name)) << name;
    worst = std::max(worst, (t - expected.at(name)).abs().max().item<double>());
    moved = std::max(moved, (t - initial.at(name)).abs().max().item<double>());
  }
  std::printf("[ figure ] llama, 3 AdamW steps of a 2-stage GPipe against transformers: largest difference %.3g "
              "(largest change of a weight %.3g)\n",
              worst, moved);
  EXPECT_LT(worst, 1e-10);
  EXPECT_GT(moved, 1e-3) << "the steps moved no weight";
}

TEST(LlamaModel, RefusesWhatItCannotBuildAtItsKey) {
  const DataSpec data = tokens(12, 64);
  const auto error = [&](const std::string& model) {
    return testing::user_error([&] { testing::define_model(model, data); });
  };
  EXPECT_NE(error("{type: llama, vocab: 64, hidden: 32, heads: 4, kv_heads: 3}").find("kv_heads"), std::string::npos);
  EXPECT_NE(error("{type: llama, vocab: 64, hidden: 32, heads: 4, kv_heads: 3}").find("3 key/value heads do not divide the 4"),
            std::string::npos);
  const std::string odd = error("{type: llama, vocab: 64, hidden: 36, heads: 4, kv_heads: 4}");
  EXPECT_NE(odd.find("heads: rotary positions rotate pairs of dimensions, but a head has 9"), std::string::npos) << odd;
  const std::string small = error("{type: llama, vocab: 32, hidden: 32, heads: 4, kv_heads: 4}");
  EXPECT_NE(small.find("set model.vocab to 64 or more"), std::string::npos) << small;
}

}  // namespace
}  // namespace pipelab::llama_model_test
