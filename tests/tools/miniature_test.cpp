// The `cpu-mini` preset `plan --emit` writes (ModelFactory::miniature): the same plan on this CPU
// in two steps, every model kind narrowed where it has widths to narrow. Every file in
// experiments/plan/ with synthetic data (the others need files no test may) and a file of
// every model kind is planned, emitted, and its miniature run here: a planned Llama-3-8B no
// longer allocates 8B parameters on a CPU. `sequential` and `torchscript` are left out: their
// layers are the user's own, with no width pipelab could narrow. A proxy run of `plan --target`
// whose data outgrows this machine is refused with the sizes, before it starts.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/io/pt_file.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace fs = std::filesystem;

namespace pipelab::miniature_test {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// Plans `file` for 2 H100-like devices (no memory cap: a 70B model's plan is emitted too),
/// emits the winner, and runs its miniature.
void plan_and_run_miniature(const std::string& file, const testing::TempDir& dir, const std::string& schemes) {
  const std::string cache = "PIPELAB_CACHE=" + dir.file("cache") + " ";
  auto [code, out] = testing::shell(cache + fmt::format("{} plan '{}' --devices 2 --device-flops 400 --memory-bw 3350 "
                                                        "--dtype bfloat16 --schemes {} --time-limit 2 --emit {} 2>&1",
                                                        PIPELAB_BINARY, file, schemes, dir.file("best.yaml")));
  ASSERT_EQ(code, 0) << out;
  const std::string emitted = testing::read_text(dir.file("best.yaml"));
  EXPECT_HAS(emitted, "cpu-mini:");
  std::tie(code, out) = testing::pipelab(fmt::format("run {} --preset cpu-mini --quiet --set run.output={}",
                                                     dir.file("best.yaml"), dir.file("run")));
  EXPECT_EQ(code, 0) << emitted << "\n" << out;
}

class PlanFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanFiles, TheEmittedMiniatureRunsHere) {
  testing::TempDir dir;
  plan_and_run_miniature(std::string(PIPELAB_EXPERIMENTS_DIR) + "/plan/" + GetParam(), dir, "pipedream_flush,gpipe");
  if (GetParam() != "llama3_8b_h100.yaml") return;
  // Llama-3-8B's miniature: its 32 layers at width 16, two query heads of 8 over one key/value
  // head, the vocabulary of the miniature data.
  const std::string emitted = testing::read_text(dir.file("best.yaml"));
  for (const char* key : {"model.hidden: 16", "model.heads: 2", "model.kv_heads: 1", "model.intermediate: 32",
                          "model.vocab: 64"}) {
    EXPECT_HAS(emitted, key);
  }
}

std::vector<std::string> synthetic_plan_files() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(std::string(PIPELAB_EXPERIMENTS_DIR) + "/plan")) {
    if (entry.path().extension() != ".yaml") continue;
    if (testing::read_text(entry.path().string()).find("type: synthetic") == std::string::npos) continue;
    out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryFile, PlanFiles, ::testing::ValuesIn(synthetic_plan_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

/// One model kind at a size worth narrowing, on data it reads.
struct Kind {
  std::string name, model, dataset;
};

/// A tensors file of 32 sequences of 16 word ids below 50, with a class each.
std::string words_file(const testing::TempDir& dir) {
  const std::string path = dir.file("words.pt");
  at::manual_seed(0);
  save_tensor_dict(path, {{"x", at::randint(1, 50, {32, 16}, at::kLong)}, {"y", at::randint(0, 2, {32}, at::kLong)}});
  return path;
}

class ModelKinds : public ::testing::TestWithParam<Kind> {};

TEST_P(ModelKinds, TheEmittedMiniatureRunsHere) {
  testing::TempDir dir;
  std::string dataset = GetParam().dataset;
  if (dataset == "words") dataset = fmt::format("{{type: tensors, path: '{}', test_fraction: 0.25}}", words_file(dir));
  testing::write_text(dir.file("e.yaml"), fmt::format(R"(
model:     {}
dataset:   {}
partition: {{stages: 2}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: adamw, lr: 0.001}}
run:       {{epochs: 1, batch_size: 16, threads: 1}}
)",
                                                      GetParam().model, dataset));
  plan_and_run_miniature(dir.file("e.yaml"), dir, "gpipe");
}

const char* const kImages = "{type: synthetic, samples: 64, test_samples: 16, shape: [3, 32, 32], classes: 10}";
const char* const kWords = "{type: synthetic, samples: 64, test_samples: 16, tokens: {vocabulary: 1000, length: 32}}";

INSTANTIATE_TEST_SUITE_P(
    EveryKind, ModelKinds,
    ::testing::Values(
        Kind{"mlp", "{type: mlp, sizes: [12, 1024, 1024, 4]}",
             "{type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}"},
        Kind{"cnn", "{type: cnn, channels: [128, 256], hidden: 1024}", kImages},
        Kind{"resnet", "{type: resnet, depth: 50}", kImages}, Kind{"vgg16", "{type: vgg16, variant: cifar}", kImages},
        Kind{"densenet121", "{type: densenet121}", kImages}, Kind{"googlenet", "{type: googlenet}", kImages},
        Kind{"inception_v3", "{type: inception_v3}",
             "{type: synthetic, samples: 64, test_samples: 16, shape: [3, 75, 75], classes: 10}"},
        Kind{"mobilenet_v2", "{type: mobilenet_v2}", kImages},
        Kind{"amoebanet_d", "{type: amoebanet_d, layers: 6, filters: 256}", kImages},
        Kind{"unet", "{type: unet, depth: 3, channels: 64}", kImages},
        Kind{"transformer", "{type: transformer, head: lm, num_words: 1000, d_model: 512, heads: 8, ff: 2048, layers: 4}",
             kWords},
        Kind{"llama", "{type: llama, vocab: 1000, hidden: 512, intermediate: 1024, layers: 4, heads: 8, kv_heads: 2}",
             kWords},
        Kind{"residual_lstm", "{type: residual_lstm, num_words: 50, d_model: 256, hidden: 256, layers: 2}", "words"},
        Kind{"roberta", "{type: roberta, vocab: 50, hidden: 256, heads: 4, intermediate: 1024, layers: 2}", "words"}),
    [](const ::testing::TestParamInfo<Kind>& info) { return info.param.name; });

// Without its miniature, Llama-3-8B is refused at `model` before a block is built: its weights,
// gradients and AdamW state need 128 GB, which LibTorch's allocator or the kernel would end
// without a word.
TEST(Miniature, AFullSizeRunThisMachineCannotHoldIsRefusedBeforeItAllocates) {
  testing::TempDir dir;
  const auto [code, out] = testing::pipelab(fmt::format("run {}/plan/llama3_8b_h100.yaml --quiet --set run.output={}",
                                                        PIPELAB_EXPERIMENTS_DIR, dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "model: model llama has 8.03e+09 parameters: with their gradients and optimizer state it needs");
  EXPECT_HAS(out, "--preset cpu-mini");
}

// plan --target's proxies keep the file's data (the target is in its units): Llama-3-8B's
// 4096-token sequences over 128256 words would need far more than this machine holds.
TEST(Miniature, AProxyWhoseDataOutgrowsThisMachineIsRefusedWithItsSizes) {
  testing::TempDir dir;
  const auto [code, out] = testing::shell(fmt::format(
      "PIPELAB_CACHE={} {} plan {}/plan/llama3_8b_h100.yaml --devices 8 --cluster h100_sxm --dtype bfloat16 "
      "--schemes pipedream_flush --time-limit 2 --target test_loss=5 --top 2 2>&1",
      dir.file("cache"), PIPELAB_BINARY, PIPELAB_EXPERIMENTS_DIR));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--target: no proxy run could start: a mini-batch of its run on this CPU keeps");
  EXPECT_HAS(out, "examples of shape [4096], 128256 classes at each position");
}

}  // namespace
}  // namespace pipelab::miniature_test
