// pipelab describe: FLOPs counted from recorded ATen calls against hand counts (linear, conv,
// grouped/strided conv, LSTM, batched matmul), per-stage totals, and the command's output.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "tests/models/zoo.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "core/device/device.h"
#include "core/model/flop_counter.h"
#include "tools/describe/model_profile.h"

namespace pipelab::describe_test {
namespace {

DataSpec flat(int64_t features, int64_t classes) {
  DataSpec d;
  d.input_shape = {features};
  d.classes = classes;
  return d;
}

TEST(Describe, MlpFlopsByHand) {
  // fc1: 784 x 256 multiply-adds per example -> 2 * 200,704 = 401,408 FLOPs; fc2 2 * 256 * 10 = 5,120.
  const ModelDef def = testing::define_model("{type: mlp, sizes: [784, 256, 10]}", flat(784, 10));
  const std::vector<BlockProfile> p = profile_blocks(def, flat(784, 10));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "fc1");
  EXPECT_EQ(p[0].flops, 401408);
  EXPECT_EQ(p[0].parameters, 784 * 256 + 256);
  EXPECT_EQ(p[0].output_shape, (std::vector<int64_t>{256}));
  EXPECT_EQ(p[1].flops, 5120);
}

TEST(Describe, SmallCnnFlopsByHand) {
  // conv1: 3x3 conv 3 -> 8 with padding 1 on 8x8: 8 * 8*8 outputs * 3*3*3 = 13,824 MACs -> 27,648
  // FLOPs (ReLU and pooling not counted); fc: flatten 8*4*4 = 128 -> 16: 2 * 2,048 = 4,096;
  // out: 16 -> 10: 2 * 160 = 320.
  const ModelDef def =
      testing::define_model("{type: cnn, channels: [8], hidden: 16, batch_norm: false}", testing::images(3, 8, 8, 10));
  const std::vector<BlockProfile> p = profile_blocks(def, testing::images(3, 8, 8, 10));
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].flops, 27648);
  EXPECT_EQ(p[0].output_shape, (std::vector<int64_t>{8, 4, 4}));
  EXPECT_EQ(p[1].flops, 4096);
  EXPECT_EQ(p[2].flops, 320);
}

TEST(Describe, CounterHandlesStridesGroupsRnnsAndBatchedMatmul) {
  torch::NoGradGuard no_grad;
  {
    // 4 -> 8 channels, 3x3, stride 2, 2 groups, on 2 x 4 x 9 x 9: outputs 2 * 8 * 4*4, each
    // (4/2) * 3*3 = 18 products -> 4,608 MACs.
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(4, 8, 3).stride(2).groups(2));
    FlopCounter c;
    conv(torch::zeros({2, 4, 9, 9}));
    EXPECT_EQ(c.flops(), 2 * 4608);
  }
  {
    // LSTM 16 -> 32 on 2 examples x 5 steps: 10 * (4*32*16 + 4*32*32) = 61,440 MACs, counted
    // once whatever kernel (oneDNN or per-step addmm) runs underneath.
    torch::nn::LSTM lstm(torch::nn::LSTMOptions(16, 32).batch_first(true));
    FlopCounter c;
    lstm(torch::zeros({2, 5, 16}));
    EXPECT_EQ(c.flops(), 2 * 61440);
  }
  {
    // [2, 3, 4, 5] @ [2, 3, 5, 6]: 6 products of 4x5 by 5x6 = 720 MACs.
    FlopCounter c;
    torch::matmul(torch::zeros({2, 3, 4, 5}), torch::zeros({2, 3, 5, 6}));
    EXPECT_EQ(c.flops(), 1440);
  }
  {
    // A linear on a [2, 7, 16] input: 14 rows x 16 x 4 = 896 MACs, once.
    torch::nn::Linear linear(16, 4);
    FlopCounter c;
    linear(torch::zeros({2, 7, 16}));
    EXPECT_EQ(c.flops(), 1792);
  }
}

TEST(Describe, StageTotalsAndImbalance) {
  std::vector<BlockProfile> blocks(3);
  blocks[0] = {"a", "", {}, {}, 10, 100};
  blocks[1] = {"b", "", {}, {}, 20, 300};
  blocks[2] = {"c", "", {}, {}, 30, 200};
  const std::vector<StageProfile> s = stage_totals(blocks, {1, 2});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].parameters, 10);
  EXPECT_EQ(s[1].parameters, 50);
  EXPECT_EQ(s[1].flops, 500);
  EXPECT_EQ(s[1].first, 1);
  // FLOPs 100 | 500: max 500 over mean 300; parameters 10 | 50: 50 / 30.
  EXPECT_DOUBLE_EQ(imbalance({s[0].flops, s[1].flops}), 500.0 / 300.0);
  const std::string text = render_profile(blocks, s, "2 stages, balance given = [1, 2]");
  EXPECT_NE(text.find("imbalance (max/mean over stages): parameters 1.67, forward FLOPs 1.67"), std::string::npos) << text;
  EXPECT_NE(text.find("1-2 b..c"), std::string::npos) << text;
  EXPECT_EQ(with_commas(1621250), "1,621,250");
}

std::pair<int, std::string> pipelab(const std::string& args) { return testing::shell(std::string(PIPELAB_BINARY) + " " + args); }

TEST(Describe, CommandMentionsEveryBlockAndStage) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), R"(
model:     {type: mlp, sizes: [32, 64, 64, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [32], classes: 4}
partition: {stages: 2, balance: [1, 2]}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16}
)");
  auto [code, out] = pipelab("describe " + dir.file("e.yaml"));
  ASSERT_EQ(code, 0) << out;
  for (const char* name : {"fc1", "fc2", "fc3", "partition: 2 stages, balance given = [1, 2]", "4,096", "8,192", "512"}) {
    EXPECT_NE(out.find(name), std::string::npos) << name << "\n" << out;
  }
  // The tensor between the stages: fc1's 64 outputs, 4 bytes each.
  EXPECT_NE(out.find("    0  the data      x [64] 256 B\n"), std::string::npos) << out;
  EXPECT_NE(out.find("    1  x [64] 256 B  (the loss)\n"), std::string::npos) << out;
  // Overrides apply, and the transformer is described without its dataset.
  std::tie(code, out) = pipelab("describe " + dir.file("e.yaml") +
                                " --set 'model={type: transformer}' --set 'partition={stages: 4, balance: spectrain_4}'"
                                " --input-shape 200 --classes 2 --token-ids");
  ASSERT_EQ(code, 0) << out;
  for (const char* name : {"embed", "layer1", "layer3", "head", "1,621,250", "balance spectrain_4 = [1, 1, 1, 2]"}) {
    EXPECT_NE(out.find(name), std::string::npos) << name << "\n" << out;
  }
  // A U-Net cut after enc2: three named tensors cross, each block's inputs and outputs shown.
  std::tie(code, out) = pipelab("describe " + dir.file("e.yaml") +
                                " --set 'model={type: unet, depth: 2, channels: 4}' --set 'partition={stages: 2, balance: [2, 4]}'"
                                " --input-shape 3,8,8 --classes 4");
  ASSERT_EQ(code, 0) << out;
  const std::string cut = "x [8, 2, 2] 128 B, skip1 [4, 8, 8] 1,024 B, skip2 [8, 4, 4] 512 B (total 1,664 B)";
  EXPECT_NE(out.find("    0  the data" + std::string(cut.size() - 8, ' ') + "  " + cut + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("    1  " + cut + "  (the loss)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("enc1 (x) -> (x, skip1)"), std::string::npos) << out;
  EXPECT_NE(out.find("dec2 (x, skip2) -> (x)"), std::string::npos) << out;
  // A language model: a target per position, and the tie named.
  std::tie(code, out) = pipelab("describe " + dir.file("e.yaml") +
                                " --set 'model={type: transformer, head: lm, tie_embeddings: true, num_words: 50}' --set partition.balance=auto"
                                " --input-shape 16 --classes 50 --token-ids --target-shape 16");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("50 classes at each of [16] positions"), std::string::npos) << out;
  EXPECT_NE(out.find("head    [16, 50]"), std::string::npos) << out;
  EXPECT_NE(out.find("tied: head.output.weight is embed.embeddings.weight"), std::string::npos) << out;
  std::tie(code, out) = pipelab("describe " + dir.file("e.yaml") + " --target-shape 16");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--target-shape describes the examples of --input-shape, which is not given"), std::string::npos)
      << out;
  std::tie(code, out) = pipelab("describe " + dir.file("e.yaml") + " --input-shape 3,x");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--input-shape: expected sizes"), std::string::npos) << out;
  std::tie(code, out) = pipelab("describe --help");
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("usage: pipelab describe FILE"), std::string::npos) << out;
}

TEST(Describe, ASweepFileDescribesItsFirstCell) {
  const auto [c2, described] = pipelab("describe " + std::string(PIPELAB_EXPERIMENTS_DIR) +
                                       "/seeds/spectrain/transformer.yaml --input-shape 200 --classes 2 --token-ids 2>&1");
  EXPECT_EQ(c2, 0) << described;
  EXPECT_NE(described.find("is a sweep: its first cell"), std::string::npos) << described;
  EXPECT_NE(described.find("embed"), std::string::npos) << described;
  // The other commands that read an experiment without training it do the same.
  for (const std::string command : {"simulate", "plan"}) {
    const auto [code, out] = pipelab(command + " " + std::string(PIPELAB_EXPERIMENTS_DIR) +
                                     "/seeds/spectrain/transformer.yaml --input-shape 200 --classes 2 --token-ids "
                                     "--device-flops 1" + (command == "plan" ? " --devices 2" : "") + " 2>&1");
    EXPECT_EQ(code, 0) << command << "\n" << out;
    EXPECT_NE(out.find("is a sweep: its first cell"), std::string::npos) << command << "\n" << out;
  }
}

// Llama-3-8B is described from shapes on the meta device (seconds), never by running its
// 8B parameters on this CPU (over 60 s and 7.5 GB before): every block's figures as the CPU
// would count them, the residual_lstm's fused LSTM (no faithful meta kernel) measured here.
TEST(Describe, ALargeModelIsDescribedFromShapes) {
  const auto [code, out] = pipelab("describe " + std::string(PIPELAB_EXPERIMENTS_DIR) + "/plan/llama3_8b_h100.yaml 2>&1");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("8,030,261,248"), std::string::npos) << out;  // Llama-3-8B's parameters
  const auto [lstm, described] = pipelab("describe " + std::string(PIPELAB_EXPERIMENTS_DIR) +
                                         "/seeds/spectrain/residual_lstm.yaml --input-shape 200 --classes 2 --token-ids 2>&1");
  EXPECT_EQ(lstm, 0) << described;
  EXPECT_NE(described.find("lstm1"), std::string::npos) << described;
}

TEST(Describe, ADeviceThisMachineLacksSaysSoWithoutARange) {
  // Without a GPU "cuda:0..cuda:-1" was the fix offered; with one, the range is right.
  if (device::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [code, out] = pipelab("run --quiet " + dir.file("e.yaml") + " --set 'run.devices=[cuda:0]' 2>&1");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("this machine has no CUDA device"), std::string::npos) << out;
  EXPECT_EQ(out.find("cuda:-1"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipelab::describe_test
