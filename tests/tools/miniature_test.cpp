// The file is the truth: what `plan` prices is what `simulate` and `run` see. Every file in
// experiments/plan/ with synthetic data (the others need files no test may) and a file of every
// model kind is planned on H100s in bfloat16: `simulate` of each of its top 3 plans reproduces the
// plan's row exactly (step, samples/s, bubble, every device's peak, bytes moved), the emitted
// file's header says so itself, and for the model kinds (small enough to run here) `run
// --cluster` of the emitted file clocks the planned step. The `cpu-mini` preset the emitted file
// carries (ModelFactory::miniature: the same plan on this CPU in two steps, every model kind
// narrowed where it has widths to narrow) runs here: a planned Llama-3-8B no longer allocates
// 8B parameters on a CPU. `sequential` and `torchscript` are left out: their
// layers are the user's own, with no width pipelab could narrow. A proxy run of `plan --target`
// whose data outgrows this machine is refused with the sizes, before it starts.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/io/pt_file.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace fs = std::filesystem;

namespace pipelab::miniature_test {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// The --set values that make the planned file run candidate `c` of `plan --json` (what --emit
/// writes for the winner).
std::string sets_of(const nlohmann::json& c) {
  const std::string scheme = c["scheme"].get<std::string>();
  std::string out = fmt::format(" --set 'scheme={}' --set partition.stages={} --set partition.replicas={}", scheme,
                                c["stages"].get<int>(),
                                scheme.find("replicas") != std::string::npos ? 1 : c["replicas"].get<int>());
  out += fmt::format(" --set 'partition.balance={}'", c["balance"].dump());
  if (!c["recompute"].empty()) out += fmt::format(" --set 'partition.recompute={}'", c["recompute"].dump());
  if (!c["offload"].empty()) {
    out += fmt::format(" --set 'partition.offload={{stages: {}, fraction: {}, prefetch: 1}}'", c["offload"].dump(),
                       c["offload_fraction"].get<double>());
  }
  if (c.contains("compression")) out += fmt::format(" --set 'compression={}'", c["compression"].get<std::string>());
  return out;
}

/// `a` and `b` equal but for the last bits of a double's sums.
void expect_same(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 1e-12 * std::max(std::abs(a), std::abs(b))) << what;
}

/// The file is the truth: `file` planned on `devices` H100s in bfloat16 (`flags`: a memory cap),
/// `simulate` of each of the top 3 plans reproduces its row exactly (the emitted winner's header
/// says so itself); with `clock`, `run --cluster` of the emitted file clocks the planned step;
/// and the emitted file's miniature runs here.
void check_emitted(const std::string& file, const testing::TempDir& dir, int devices, const std::string& flags,
                   bool clock = false) {
  const std::string env = "PIPELAB_CACHE=" + dir.file("cache") + " OMP_NUM_THREADS=1 ";
  const std::string cost = " --cluster h100_sxm";
  // A time limit no search here reaches (each takes under a second once profiled): which
  // plans are ranked must not depend on how busy the machine is.
  auto [code, out] = testing::shell(env + fmt::format("{} plan '{}' --devices {}{} --dtype bfloat16 {} --top 3 "
                                                      "--time-limit 600 --json {} --emit {} 2>&1",
                                                      PIPELAB_BINARY, file, devices, cost, flags, dir.file("r.json"),
                                                      dir.file("best.yaml")));
  ASSERT_EQ(code, 0) << out;
  const std::string emitted = testing::read_text(dir.file("best.yaml"));
  EXPECT_HAS(emitted, "cpu-mini:");
  EXPECT_HAS(emitted, "amp: bf16");
  std::tie(code, out) = testing::shell(env + fmt::format("{} simulate {}{} 2>&1", PIPELAB_BINARY, dir.file("best.yaml"), cost));
  ASSERT_EQ(code, 0) << out;
  EXPECT_HAS(out, "the plan in the file's header (# Predicted): reproduced exactly");
  const nlohmann::json ranked = nlohmann::json::parse(testing::read_text(dir.file("r.json")))["ranked"];
  for (size_t i = 0; i < ranked.size() && i < 3; ++i) {
    const nlohmann::json& c = ranked[i];
    std::tie(code, out) = testing::shell(env + fmt::format("{} simulate {}{}{} --json {} 2>&1", PIPELAB_BINARY,
                                                           dir.file("best.yaml"), cost, sets_of(c), dir.file("s.json")));
    ASSERT_EQ(code, 0) << c["label"] << "\n" << out;
    const nlohmann::json r = nlohmann::json::parse(testing::read_text(dir.file("s.json")))["schemes"][0];
    const std::string label = c["label"].get<std::string>();
    for (const char* key : {"step_seconds", "samples_per_second", "bubble", "bytes_per_step"}) {
      expect_same(r[key].get<double>(), c[key].get<double>(), label + " " + key);
    }
    ASSERT_EQ(r["peak_bytes"].size(), c["peak_bytes"].size()) << label;
    for (size_t d = 0; d < c["peak_bytes"].size(); ++d) {
      expect_same(r["peak_bytes"][d].get<double>(), c["peak_bytes"][d].get<double>(), label + " peak " + std::to_string(d));
    }
  }
  if (clock) {
    // The run that was priced, one step of it, clocked on the cluster: the plan's step.
    std::tie(code, out) = testing::pipelab(fmt::format("run {}{} --set run.max_steps=1 --quiet --set run.output={}",
                                                       dir.file("best.yaml"), cost, dir.file("clocked")));
    ASSERT_EQ(code, 0) << out;
    const nlohmann::json s = nlohmann::json::parse(testing::read_text(dir.file("clocked/summary.json")));
    expect_same(s["simulated"]["step_seconds"].get<double>(), ranked[0]["step_seconds"].get<double>(), "the run's clock");
  }
  std::tie(code, out) = testing::pipelab(fmt::format("run {} --preset cpu-mini --quiet --set run.output={}",
                                                     dir.file("best.yaml"), dir.file("run")));
  EXPECT_EQ(code, 0) << emitted << "\n" << out;
}

class PlanFiles : public ::testing::TestWithParam<std::string> {};

/// Devices and a memory cap a plan file is planned for: its own example's scale, a cap that makes
/// Llama-3-8B recompute, none that would leave the 70B model no plan on 16 devices.
std::pair<int, std::string> scale_of(const std::string& file) {
  if (file == "llama3_8b_h100.yaml") return {8, "--memory-cap 60"};
  if (file == "lm_70b_h100.yaml") return {16, "--memory-cap 10000"};
  return {8, ""};
}

TEST_P(PlanFiles, SimulateReproducesTheTopPlansAndTheMiniatureRunsHere) {
  testing::TempDir dir;
  const auto [devices, flags] = scale_of(GetParam());
  check_emitted(std::string(PIPELAB_EXPERIMENTS_DIR) + "/plan/" + GetParam(), dir, devices, flags);
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

/// One model kind at a size worth narrowing, on data it reads; `clock`: a step of it at full
/// size in bf16 is cheap enough on this CPU to check `run --cluster`'s clock.
struct Kind {
  std::string name, model, dataset;
  bool clock = false;
};

/// A tensors file of 32 sequences of 16 word ids below 50, with a class each.
std::string words_file(const testing::TempDir& dir) {
  const std::string path = dir.file("words.pt");
  at::manual_seed(0);
  save_tensor_dict(path, {{"x", at::randint(1, 50, {32, 16}, at::kLong)}, {"y", at::randint(0, 2, {32}, at::kLong)}});
  return path;
}

class ModelKinds : public ::testing::TestWithParam<Kind> {};

TEST_P(ModelKinds, SimulateAndTheRunsClockReproduceThePlanAndTheMiniatureRunsHere) {
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
  check_emitted(dir.file("e.yaml"), dir, 2, "", GetParam().clock);
}

const char* const kImages = "{type: synthetic, samples: 64, test_samples: 16, shape: [3, 32, 32], classes: 10}";
const char* const kWords = "{type: synthetic, samples: 64, test_samples: 16, tokens: {vocabulary: 1000, length: 32}}";

INSTANTIATE_TEST_SUITE_P(
    EveryKind, ModelKinds,
    ::testing::Values(
        Kind{"mlp", "{type: mlp, sizes: [12, 1024, 1024, 4]}",
             "{type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}", true},
        Kind{"cnn", "{type: cnn, channels: [128, 256], hidden: 1024}", kImages, true},
        Kind{"resnet", "{type: resnet, depth: 50}", kImages}, Kind{"vgg16", "{type: vgg16, variant: cifar}", kImages},
        Kind{"densenet121", "{type: densenet121}", kImages}, Kind{"googlenet", "{type: googlenet}", kImages},
        Kind{"inception_v3", "{type: inception_v3}",
             "{type: synthetic, samples: 64, test_samples: 16, shape: [3, 75, 75], classes: 10}"},
        Kind{"mobilenet_v2", "{type: mobilenet_v2}", kImages},
        Kind{"amoebanet_d", "{type: amoebanet_d, layers: 6, filters: 256}", kImages},
        Kind{"unet", "{type: unet, depth: 3, channels: 64}", kImages},
        Kind{"transformer", "{type: transformer, head: lm, num_words: 1000, d_model: 512, heads: 8, ff: 2048, layers: 4}",
             kWords, true},
        Kind{"llama", "{type: llama, vocab: 1000, hidden: 512, intermediate: 1024, layers: 4, heads: 8, kv_heads: 2}",
             kWords, true},
        Kind{"residual_lstm", "{type: residual_lstm, num_words: 50, d_model: 256, hidden: 256, layers: 2}", "words", true},
        Kind{"roberta", "{type: roberta, vocab: 50, hidden: 256, heads: 4, intermediate: 1024, layers: 2}", "words", true}),
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
