// Mixed precision (run.amp) on the CPU: bf16 autocast keeps float32 master weights and makes
// a pipeline equal to one stage; fp16's per-stage loss scaler skips overflowing updates,
// backs off and grows as torch.amp.GradScaler does, and survives a resume.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/io/pt_file.h"
#include "core/records/run_record.h"
#include "core/stage/precision.h"
#include "tests/support/helpers.h"

namespace pipelab::precision_test {
namespace {

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 32, 32, 32, 4]}
dataset:   {type: synthetic, samples: 320, test_samples: 64, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3, threads: 1}
)";

TEST(Amp, Bf16PipelineEqualsOneStage) {
  const TensorDict single = testing::train(kMlp, {"run.amp=bf16"});
  // One micro-batch: the same kernels on the same rows, so the same bits.
  EXPECT_TRUE(testing::identical(single, testing::train(kMlp, {"run.amp=bf16", "scheme={type: gpipe, chunks: 1}"})));
  EXPECT_TRUE(testing::identical(single, testing::train(kMlp, {"run.amp=bf16", "scheme.type=naive"})));
  // Four micro-batches: bf16 matrix products over 4 rows instead of 16 round differently,
  // but far less than bf16 differs from float32.
  const TensorDict fp32 = testing::train(kMlp);
  const double vs_fp32 = testing::max_difference(single, fp32);
  EXPECT_GT(vs_fp32, 1e-3);  // autocast really ran
  EXPECT_LT(testing::max_difference(single, testing::train(kMlp, {"run.amp=bf16", "scheme={type: gpipe, chunks: 4}"})),
            vs_fp32);
  for (const auto& [name, t] : single) EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
}

TEST(Amp, Bf16HalvesTheActivationTraffic) {
  testing::TempDir dir;
  const auto bytes = [&](const std::string& name, const std::string& amp) {
    Experiment e = testing::experiment(kMlp, dir.file(name), {"run.amp=" + amp, "scheme={type: gpipe, chunks: 2}"});
    RunnerOptions o;
    o.quiet = true;
    return Runner(e, o).run().history.back().bytes_forward_per_step;
  };
  EXPECT_EQ(bytes("a", "none"), 16 * 32 * 4);  // one boundary of 32 floats per example
  EXPECT_EQ(bytes("b", "bf16"), 16 * 32 * 2);
}

TEST(LossScaler, SkipsOnOverflowBacksOffAndGrows) {
  LossScaleOptions o;
  o.init_scale = 1024;
  o.growth_interval = 3;
  LossScaler scaler(o);
  at::Tensor p = at::ones({2}).requires_grad_(true);
  p.mutable_grad() = at::tensor({2048.0f, -1024.0f});
  EXPECT_TRUE(scaler.unscale({p}));
  EXPECT_TRUE(at::equal(p.grad(), at::tensor({2.0f, -1.0f})));
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024);
  scaler.update(true);  // the third finite update in a row
  EXPECT_EQ(scaler.scale(), 2048);
  p.mutable_grad() = at::tensor({INFINITY, 1.0f});
  EXPECT_FALSE(scaler.unscale({p}));
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_EQ(scaler.skipped(), 1);
  p.mutable_grad() = at::tensor({NAN, 1.0f});
  EXPECT_FALSE(scaler.unscale({p}));
  scaler.update(true);
  scaler.update(true);  // growth counts restart after an overflow
  LossScaler copy(o);
  copy.load_state(scaler.state());
  EXPECT_EQ(copy.scale(), scaler.scale());
  EXPECT_EQ(copy.skipped(), 1);
}

TEST(Amp, Fp16SkipsOverflowingUpdatesPerStageAndResumes) {
  // A start scale of 2^40 overflows fp16 at once: every stage skips updates and halves its
  // scale until its gradients are finite, then trains.
  testing::TempDir dir;
  const std::vector<std::string> fp16{"run.amp=fp16", "run.loss_scale={init_scale: 1099511627776.0}",
                                      "scheme={type: gpipe, chunks: 2}", "run.epochs=3"};
  Experiment straight = testing::experiment(kMlp, dir.file("straight"), fp16);
  const RunSummary s = Runner(straight, {false, true}).run();
  ASSERT_EQ(s.skipped_updates.size(), 2u);
  for (int64_t k : s.skipped_updates) EXPECT_GT(k, 0);
  for (double scale : s.loss_scales) EXPECT_LT(scale, 1099511627776.0);
  EXPECT_LT(s.history.back().train_loss, s.history.front().train_loss);
  EXPECT_NE(testing::read_text(dir.file("straight/summary.json")).find("\"skipped_updates\""), std::string::npos);
  // Resumed after one epoch: the scalers come back from state.pt, and so do the same bits.
  Experiment first = testing::experiment(kMlp, dir.file("resumed"), fp16);
  RunnerOptions stop{false, true};
  stop.stop_after = 1;
  Runner(first, stop).run();
  Experiment second = testing::experiment(kMlp, dir.file("resumed"), fp16);
  RunnerOptions resume{false, true};
  resume.resume = true;
  Runner(second, resume).run();
  EXPECT_TRUE(testing::read_text(dir.file("straight/checkpoints/final.pt")) ==
              testing::read_text(dir.file("resumed/checkpoints/final.pt")));
}

TEST(Amp, ConfigErrors) {
  EXPECT_NE(testing::user_error([] { testing::experiment(kMlp, "", {"run.amp=fp8"}); }).find("'fp8' is not one of"),
            std::string::npos);
  EXPECT_NE(testing::user_error([] { testing::experiment(kMlp, "", {"run.amp=bf16", "run.dtype=float64"}); })
                .find("float32 master weights"),
            std::string::npos);
  EXPECT_NE(testing::user_error([] {
              Experiment e = testing::experiment(kMlp, "", {"run.amp=fp16", "scheme={type: interlocking, mode: local}"});
              Runner r(e, {false, true});
            }).find("computes its gradients itself"),
            std::string::npos);
}

// run.cuda_graphs (core/stage/stage_graphs.h): the CPU has no graphs; refused before
// anything runs (tests/gpu/gpu_graphs_test.cpp has the refusals that need a GPU).
TEST(CudaGraphs, ConfigErrors) {
  const std::string cpu = testing::user_error([] { testing::experiment(kMlp, "", {"run.cuda_graphs=true"}); });
  EXPECT_NE(cpu.find("run.cuda_graphs"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("CUDA graphs need CUDA devices, and run.devices names cpu"), std::string::npos) << cpu;
  const std::string mixed = testing::user_error(
      [] { testing::experiment(kMlp, "", {"run.cuda_graphs=true", "run.devices=[cuda:0, cpu]"}); });
  EXPECT_NE(mixed.find("names cpu"), std::string::npos) << mixed;
}

TEST(PinMemory, RefusedWithoutACudaDeviceAndReadAsAChoice) {
  const std::string cpu = testing::user_error([] { testing::experiment(kMlp, "", {"run.loader.pin_memory=true"}); });
  EXPECT_NE(cpu.find("run.loader.pin_memory"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("run.devices names none"), std::string::npos) << cpu;
  const std::string typo = testing::user_error([] { testing::experiment(kMlp, "", {"run.loader.pin_memory=yes"}); });
  EXPECT_NE(typo.find("'yes' is not one of auto, true, false"), std::string::npos) << typo;
  // auto and false train on the CPU as before.
  EXPECT_NO_THROW(testing::experiment(kMlp, "", {"run.loader.pin_memory=false"}));
  EXPECT_EQ(testing::experiment(kMlp, "", {}).run.loader.pin_memory, PrefetchOptions::Pin::Auto);
}

}  // namespace
}  // namespace pipelab::precision_test
