// A tied `llama` (tie_embeddings: true) and Hugging Face's checkpoints, without transformers:
// a file in LlamaForCausalLM's names is written here from the model's own blocks. Hugging
// Face writes no lm_head.weight for a tied model: the embedding fills the head. A file whose
// head differs from its embedding is an untied model's, refused at init.from rather than
// have its head silently replaced. Older files' per-layer rotary tables load strictly.
#include <gtest/gtest.h>

#include <regex>

#include "core/io/safetensors.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::llama_checkpoint_test {
namespace {

const char* const kModel =
    "{type: llama, vocab: 32, hidden: 16, intermediate: 24, layers: 2, heads: 2, kv_heads: 1, tie_embeddings: true}";

std::string experiment(const std::string& from, bool strict = true) {
  return fmt::format(R"(
model:     {}
dataset:   {{type: synthetic, samples: 16, test_samples: 8, tokens: {{vocabulary: 32, length: 8}}}}
partition: {{stages: 2}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: adamw, lr: 0.001}}
init:      {{from: '{}', names: huggingface, strict: {}}}
run:       {{epochs: 1, batch_size: 4, seed: 1, threads: 1, progress: false}}
)",
                     kModel, from, strict ? "true" : "false");
}

/// The model's own tensors under LlamaForCausalLM's names (both tied copies).
TensorDict hugging_face_state() {
  DataSpec data;
  data.input_shape = {8};
  data.integer_input = true;
  data.target_shape = {8};
  data.classes = 32;
  std::vector<Block> blocks = testing::build_model(testing::define_model(kModel, data));
  TensorDict out;
  const std::regex layer(R"(layer(\d+)\.(.*))");
  for (Block& b : blocks) {
    for (const auto& kv : b.module.ptr()->named_parameters()) {
      const std::string ours = b.name + "." + kv.key();
      std::smatch m;
      std::string theirs = std::regex_match(ours, m, layer) ? "model.layers." + m[1].str() + "." + m[2].str()
                           : ours.rfind("embed.", 0) == 0  ? "model." + ours.substr(6)
                           : ours.rfind("head.norm.", 0) == 0 ? "model." + ours.substr(5)
                                                              : ours.substr(5);  // head.lm_head.* -> lm_head.*
      out.emplace_back(theirs, kv.value().detach().clone());
    }
  }
  return out;
}

at::Tensor entry(const TensorDict& d, const std::string& name) {
  for (const auto& kv : d) {
    if (kv.first == name) return kv.second;
  }
  return {};
}

/// The built run's tensor `name` ("<block>.<param>").
at::Tensor parameter(Runner& runner, const std::string& name) {
  for (Stage* s : runner.stages()) {
    for (const auto& kv : s->module().named_parameters()) {
      if (kv.key() == name) return kv.value();
    }
  }
  return {};
}

TEST(LlamaCheckpoint, HuggingFacesTiedFileWithoutAHeadLoadsStrictly) {
  testing::TempDir dir;
  TensorDict hf = hugging_face_state();
  const at::Tensor embedding = entry(hf, "model.embed_tokens.weight");
  ASSERT_TRUE(embedding.defined());
  hf.erase(std::remove_if(hf.begin(), hf.end(), [](const auto& kv) { return kv.first == "lm_head.weight"; }), hf.end());
  // Older files keep a rotary table per layer, which the model computes: dropped, not refused.
  hf.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", at::ones({4}));
  save_safetensors(dir.file("tied.safetensors"), hf);
  Experiment e = testing::experiment(experiment(dir.file("tied.safetensors")), dir.file("run"));
  Runner runner(e);
  EXPECT_TRUE(at::equal(parameter(runner, "embed.embed_tokens.weight"), embedding));
  EXPECT_TRUE(at::equal(parameter(runner, "head.lm_head.weight"), embedding));
}

TEST(LlamaCheckpoint, AFileWhoseHeadDiffersFromItsEmbeddingIsAnUntiedModels) {
  testing::TempDir dir;
  TensorDict hf = hugging_face_state();
  const at::Tensor embedding = entry(hf, "model.embed_tokens.weight");
  for (auto& kv : hf) {
    if (kv.first == "lm_head.weight") kv.second = embedding + 0.5;
  }
  save_safetensors(dir.file("untied.safetensors"), hf);
  for (const bool strict : {true, false}) {
    const std::string error = testing::user_error(
        [&] { Experiment e = testing::experiment(experiment(dir.file("untied.safetensors"), strict), dir.file("run")); Runner r(e); });
    EXPECT_NE(error.find("init.from"), std::string::npos) << error;
    EXPECT_NE(error.find("largest difference 0.5"), std::string::npos) << error;
    EXPECT_NE(error.find("tie_embeddings: false"), std::string::npos) << error;
  }
  // Untied, the same file loads with its own head.
  const std::string untied = std::regex_replace(experiment(dir.file("untied.safetensors")), std::regex("tie_embeddings: true"),
                                                "tie_embeddings: false");
  Experiment e = testing::experiment(untied, dir.file("run"));
  Runner runner(e);
  EXPECT_TRUE(at::equal(parameter(runner, "head.lm_head.weight"), entry(hf, "lm_head.weight")));
}

}  // namespace
}  // namespace pipelab::llama_checkpoint_test
