// Models that are not one chain of tensors (core/model/block_io.h) through whole runs: a
// U-Net cut through several skip connections trains under every synchronous scheme exactly
// as on one device, every executor gives the same bits, the bytes crossing each cut are
// what a hand count says, and a scheme that cannot route several tensors says so.
#include <gtest/gtest.h>

#include "core/processes/process_group.h"
#include "core/run/runner.h"
#include "tests/support/helpers.h"

namespace pipelab::skip_connections_test {
namespace {

// 20 steps of batch 16 of a U-Net of depth 2 on 3x8x8 images: blocks enc1, enc2, bottom,
// dec2, dec1, head. The balance [2, 1, 1, 2] cuts after enc2 (x, skip1, skip2 cross), after
// bottom (the same three) and after dec2 (x, skip1): skip1 crosses three boundaries.
const char* kUnet = R"(
model:     {type: unet, depth: 2, channels: 4, batch_norm: false}
dataset:   {type: synthetic, samples: 320, test_samples: 32, shape: [3, 8, 8], classes: 4}
partition: {stages: 4, balance: [2, 1, 1, 2]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 1, batch_size: 16, seed: 3, threads: 1}
)";

TEST(SkipConnections, EverySynchronousSchemeOnAUnetEqualsSingle) {
  const std::vector<std::string> f64{"run.dtype=float64"};
  const TensorDict single = testing::train(kUnet, f64);
  for (const std::string& scheme : std::vector<std::string>{
           "{type: naive}", "{type: gpipe, chunks: 4, checkpoint: never}", "{type: gpipe, chunks: 4, checkpoint: always}",
           "{type: pipedream_flush, chunks: 4}", "{type: interleaved_1f1b, chunks: 4, virtual_stages: 2}",
           "{type: looped_bfs, chunks: 4, virtual_stages: 2}", "{type: zb_h1, chunks: 4}", "{type: zb_h2, chunks: 4}",
           "{type: zbv, chunks: 4}", "{type: dualpipe_v, chunks: 4}", "{type: dp}"}) {
    std::vector<std::string> o = f64;
    o.push_back("scheme=" + scheme);
    EXPECT_LT(testing::max_difference(single, testing::train(kUnet, o)), 1e-10) << scheme;
  }
  // ... and training moved the weights far more than that.
  EXPECT_GT(testing::max_difference(single, testing::train(kUnet, {"run.dtype=float64", "optimizer.lr=0.2"})), 1e-3);
}

TEST(SkipConnections, ThreadedEqualsSequentialBitwise) {
  for (const char* scheme : {"{type: gpipe, chunks: 4, checkpoint: except_last}", "{type: zb_h1, chunks: 4}",
                             "{type: pipedream}", "{type: spectrain}"}) {
    const auto with = [&](const std::string& executor) {
      return testing::train(kUnet, {std::string("scheme=") + scheme, "run.executor=" + executor});
    };
    const TensorDict sequential = with("sequential"), threaded = with("{type: threaded, intra_op_threads: 1}");
    EXPECT_TRUE(testing::identical(sequential, threaded))
        << scheme << ": max difference " << testing::max_difference(sequential, threaded);
  }
}

TEST(SkipConnections, TwoProcessesEqualSequentialBitwise) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  // Two `pipelab run` processes over a Gloo group: ranks 0 and 1 hold stages {0, 1} and
  // {2, 3}, so the cut between them carries x, skip1 and skip2 between processes, and their
  // gradients come back. (Real processes: two Runners in one process would share LibTorch's
  // global generator while building their blocks.)
  testing::TempDir dir;
  testing::write_text(dir.file("unet.yaml"), kUnet);
  const std::vector<std::string> common{"scheme={type: gpipe, chunks: 4}"};
  const TensorDict sequential = testing::train(kUnet, common);
  const int port = dist::free_port();
  std::string command;
  for (int p = 0; p < 2; ++p) {
    command += fmt::format("{} run {} --set 'scheme={{type: gpipe, chunks: 4}}' --set run.output={} "
                           "--set 'run.executor={{type: distributed, rank: {}, world_size: 2, master: \"127.0.0.1:{}\", "
                           "timeout_s: 60, intra_op_threads: 1}}' > {} 2>&1 & p{}=$!; ",
                           PIPELAB_BINARY, dir.file("unet.yaml"), dir.file("run"), p, port, dir.file(fmt::format("rank{}.log", p)), p);
  }
  const auto [code, out] = testing::shell(command + "wait $p0 && wait $p1");
  ASSERT_EQ(code, 0) << out << testing::read_text(dir.file("rank0.log")) << testing::read_text(dir.file("rank1.log"));
  const TensorDict distributed = load_tensor_dict(dir.file("run/checkpoints/final.pt"));
  EXPECT_TRUE(testing::identical(sequential, distributed)) << "max difference " << testing::max_difference(sequential, distributed);
}

TEST(SkipConnections, BytesAcrossEachCutByHand) {
  // Micro-batches of 4 float64 examples. Per example: after enc2, x [8, 2, 2] = 32 values,
  // skip1 [4, 8, 8] = 256, skip2 [8, 4, 4] = 128; after bottom x is [16, 2, 2] = 64; after
  // dec2 x [8, 4, 4] = 128 and skip1. Every tensor is floating, so each gradient is as big.
  const int64_t cut0 = 32 + 256 + 128, cut1 = 64 + 256 + 128, cut2 = 128 + 256;
  const double per_step = 4.0 * 4 * 8 * static_cast<double>(cut0 + cut1 + cut2);  // 4 micro-batches of 4
  testing::TempDir dir;
  Experiment e = testing::experiment(kUnet, dir.file("run"), {"run.dtype=float64", "scheme={type: gpipe, chunks: 4}"});
  RunnerOptions options;
  options.quiet = true;
  const RunSummary s = Runner(e, options).run();
  EXPECT_EQ(s.history.back().bytes_forward_per_step, per_step);
  EXPECT_EQ(s.history.back().bytes_backward_per_step, per_step);
}

TEST(SkipConnections, ASchemeThatTrainsOnOneTensorRefusesThem) {
  const std::string error = testing::user_error([] { testing::train(kUnet, {"scheme={type: interlocking, mode: local}"}); });
  EXPECT_NE(error.find("scheme interlocking trains each stage on the one tensor it sends, but model unet sends several"),
            std::string::npos)
      << error;
}

// A Transformer whose padding mask travels with the hidden state: token ids with trailing
// padding (id 0), cut after the first layer.
TEST(SkipConnections, TransformerWithPaddingMaskEqualsSingle) {
  testing::TempDir dir;
  const at::Tensor lengths = at::arange(40, at::kLong).remainder(7) + 2;  // 2 ... 8 words of 10
  const at::Tensor ids = (at::arange(400, at::kLong).reshape({40, 10}).remainder(29) + 1) *
                         at::arange(10, at::kLong).unsqueeze(0).lt(lengths.unsqueeze(1));
  c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
  d.insert("x", ids);
  d.insert("y", lengths.remainder(2));
  save_pt(dir.file("ids.pt"), d);
  const std::string yaml = fmt::format(R"(
model:     {{type: transformer, num_words: 32, d_model: 8, heads: 2, ff: 8, layers: 2, dropout: 0.0, padding_mask: true}}
dataset:   {{type: tensors, path: '{}', test_fraction: 0.2}}
partition: {{stages: 2, balance: [2, 2]}}
scheme:    {{type: single}}
optimizer: {{type: sgd, lr: 0.1}}
run:       {{epochs: 1, batch_size: 8, seed: 3, dtype: float64}}
)",
                                       dir.file("ids.pt"));
  const TensorDict single = testing::train(yaml);
  EXPECT_LT(testing::max_difference(single, testing::train(yaml, {"scheme={type: gpipe, chunks: 2}"})), 1e-10);
  EXPECT_LT(testing::max_difference(single, testing::train(yaml, {"scheme={type: zb_h1, chunks: 2}"})), 1e-10);
  // The mask changes what the model computes.
  EXPECT_GT(testing::max_difference(single, testing::train(yaml, {"model.padding_mask=false"})), 1e-6);
}

// AmoebaNet-D's cells pass (x, prev) across the cut.
TEST(SkipConnections, AmoebanetPairAcrossACutEqualsSingle) {
  const char* yaml = R"(
model:     {type: amoebanet_d, layers: 3, filters: 8}
dataset:   {type: synthetic, samples: 32, test_samples: 8, shape: [3, 32, 32], classes: 4}
partition: {stages: 2, balance: [4, 5]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 8, seed: 3, dtype: float64, threads: 1}
)";
  const TensorDict single = testing::train(yaml);
  // Batch norm sees each micro-batch on its own under GPipe, so compare with one chunk.
  EXPECT_LT(testing::max_difference(single, testing::train(yaml, {"scheme={type: gpipe, chunks: 1}"})), 1e-10);
  EXPECT_TRUE(testing::identical(testing::train(yaml, {"scheme={type: gpipe, chunks: 2}"}),
                                 testing::train(yaml, {"scheme={type: gpipe, chunks: 2}", "run.executor={type: threaded, intra_op_threads: 1}"})));
}

}  // namespace
}  // namespace pipelab::skip_connections_test
