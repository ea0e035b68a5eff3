// Whole runs on cuda:0: GPipe's checkpointing and deferred batch norm, checkpoints of CUDA
// tensors (written, read by Python's torch.load(weights_only=True), resumed bit for bit),
// and mixed precision (bf16 autocast, fp16 with per-stage loss scaling).
#include <ATen/ATen.h>

#include "core/data/loader.h"
#include "core/io/pt_file.h"
#include "core/records/run_record.h"
#include "core/records/state_dict.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"

namespace pipelab::gpu_training_test {
namespace {

// The CPU equivalence test's MLP (tests/schemes/equivalence_test.cpp) on cuda:0.
const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 32, 32, 32, 4], dropout: 0.0}
dataset:   {type: synthetic, samples: 320, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 4, balance: [1, 1, 1, 1]}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 1.0e-3}
run:       {epochs: 1, batch_size: 16, seed: 3, devices: [cuda:0]}
)";

TEST(GpuGpipe, EqualsSingleOnTheWholeMiniBatchForEveryCheckpointMode) {
  PIPELAB_REQUIRE_GPU();
  const std::vector<std::string> f64{"run.dtype=float64"};
  const TensorDict single = testing::train(kMlp, f64);
  for (const char* mode : {"always", "except_last", "never"}) {
    std::vector<std::string> o = f64;
    o.push_back("scheme={type: gpipe, chunks: 4, checkpoint: " + std::string(mode) + "}");
    EXPECT_LT(testing::max_difference(single, testing::train(kMlp, o)), 1e-10) << mode;
  }
}

TEST(GpuGpipe, CheckpointingChangesNothingButMemory) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  // Recomputation replays the CUDA generators' states: the same dropout masks, bit for bit.
  const auto run = [](const std::string& mode) {
    return testing::train(kMlp, {"model.dropout=0.25", "scheme={type: gpipe, chunks: 4, checkpoint: " + mode + "}"});
  };
  const TensorDict never = run("never");
  EXPECT_TRUE(testing::identical(never, run("always")));
  EXPECT_TRUE(testing::identical(never, run("except_last")));
}

TEST(GpuGpipe, DeferredBatchNormMatchesSingleForTheFirstLayer) {
  PIPELAB_REQUIRE_GPU();
  // As BatchNorm.DeferredRunMatchesSingleForTheFirstLayer on the CPU.
  const char* yaml = R"(
model:     {type: cnn, channels: [4, 8], hidden: 16, batch_norm: true}
dataset:   {type: synthetic, samples: 16, test_samples: 16, shape: [1, 8, 8], classes: 3}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, dtype: float64, devices: [cuda:0]}
)";
  const TensorDict single = testing::train(yaml);
  const TensorDict dbn = testing::train(yaml, {"scheme={type: gpipe, chunks: 4, deferred_batch_norm: true}"});
  const TensorDict plain = testing::train(yaml, {"scheme={type: gpipe, chunks: 4}"});
  const auto get = [](const TensorDict& d, const std::string& name) {
    for (const auto& [k, v] : d) {
      if (k == name) return v;
    }
    return at::Tensor();
  };
  for (const char* name : {"conv1.bn.running_mean", "conv1.bn.running_var"}) {
    EXPECT_LT((get(single, name) - get(dbn, name)).abs().max().item<double>(), 1e-12) << name;
    EXPECT_GT((get(single, name) - get(plain, name)).abs().max().item<double>(), 1e-6) << name;
  }
  EXPECT_EQ(get(dbn, "conv1.bn.num_batches_tracked").item<int64_t>(), 1);
}

const char* kCnn = R"(
model:     {type: cnn, channels: [4, 8], hidden: 16, batch_norm: true, dropout: 0.2}
dataset:   {type: synthetic, samples: 96, test_samples: 24, shape: [1, 8, 8], classes: 3}
partition: {stages: 3, balance: auto}
scheme:    {type: gpipe, chunks: 2, deferred_batch_norm: true}
optimizer: {type: adamw, lr: 0.01, weight_decay: 0.01}
run:       {epochs: 3, batch_size: 16, seed: 11, devices: [cuda:0]}
)";

TEST(GpuCheckpoints, CudaTensorsAreWrittenReadByPythonAndResumedBitForBit) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  testing::TempDir dir;
  Experiment straight = testing::experiment(kCnn, dir.file("straight"));
  Runner(straight, {false, true}).run();
  // Stop after one epoch and resume: weights, optimizer state and the CUDA generators'
  // states (dropout) all come back from checkpoints/state.pt.
  Experiment first = testing::experiment(kCnn, dir.file("resumed"));
  RunnerOptions stop{false, true};
  stop.stop_after = 1;
  EXPECT_EQ(Runner(first, stop).run().status, "stopped");
  Experiment second = testing::experiment(kCnn, dir.file("resumed"));
  RunnerOptions resume{false, true};
  resume.resume = true;
  EXPECT_EQ(Runner(second, resume).run().status, "finished");
  const std::string final_pt = dir.file("straight/checkpoints/final.pt");
  EXPECT_TRUE(testing::read_text(final_pt) == testing::read_text(dir.file("resumed/checkpoints/final.pt")));
  // init.from loads the file back into CUDA stages.
  Experiment again = testing::experiment(kCnn, dir.file("again"), {"init.from=" + final_pt});
  Runner runner(again, {false, true});
  for (Stage* s : runner.stages()) EXPECT_TRUE(s->parameters().front().is_cuda());
  EXPECT_TRUE(testing::identical(load_tensor_dict(final_pt), model_state(runner.stages())));
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 with torch not installed";
  testing::write_text(dir.file("check.py"), R"(import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
assert 'conv1.conv.weight' in d and d['conv1.conv.weight'].device.type == 'cpu', list(d)
s = torch.load(sys.argv[2], weights_only=True)
print('python read ok', len(d), sorted(s))
)");
  const auto [code, out] = testing::shell("python3 " + dir.file("check.py") + " " + final_pt + " " +
                                          dir.file("resumed/checkpoints/state.pt"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("python read ok"), std::string::npos) << out;
}

TEST(GpuAmp, Bf16GpipeEqualsSingleAndFp16Trains) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  const char* yaml = R"(
model:     {type: mlp, sizes: [12, 32, 32, 32, 4]}
dataset:   {type: synthetic, samples: 320, test_samples: 64, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 3, devices: [cuda:0]}
)";
  const TensorDict single = testing::train(yaml, {"run.amp=bf16"});
  EXPECT_TRUE(testing::identical(single, testing::train(yaml, {"run.amp=bf16", "scheme={type: gpipe, chunks: 1}"})));
  EXPECT_GT(testing::max_difference(single, testing::train(yaml)), 1e-4);  // autocast was on
  for (const auto& [name, t] : single) EXPECT_EQ(t.scalar_type(), at::kFloat) << name;  // master weights
  // fp16: per-stage loss scaling, then the same weights as one stage when nothing overflows.
  const TensorDict fp16 = testing::train(yaml, {"run.amp=fp16"});
  EXPECT_TRUE(testing::identical(fp16, testing::train(yaml, {"run.amp=fp16", "scheme={type: gpipe, chunks: 1}"})));
  EXPECT_GT(testing::max_difference(fp16, single), 1e-4);
}

// Pinned batches (run.loader.pin_memory, auto on CUDA) are the same numbers copied another
// way: the run's weights are bit-identical with pageable batches, on both executors.
TEST(GpuPinnedMemory, PinnedBatchesTrainTheSameBits) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  for (const char* executor : {"sequential", "threaded"}) {
    const std::vector<std::string> common{"scheme={type: gpipe, chunks: 4}", std::string("run.executor=") + executor};
    std::vector<std::string> pageable = common, pinned = common;
    pageable.push_back("run.loader.pin_memory=false");
    pinned.push_back("run.loader.pin_memory=true");
    const TensorDict a = testing::train(testing::kGpuMlp, pageable), b = testing::train(testing::kGpuMlp, pinned),
                     c = testing::train(testing::kGpuMlp, common);
    EXPECT_TRUE(testing::identical(a, b)) << executor << ": max difference " << testing::max_difference(a, b);
    EXPECT_TRUE(testing::identical(b, c)) << executor << ": auto differs from pinned";
  }
}

/// Eight examples of two features, labelled by their index.
class Eight : public Dataset {
 public:
  int64_t size() const override { return 8; }
  Batch get(const std::vector<int64_t>& indices, uint64_t) const override {
    const at::Tensor i = at::tensor(indices, at::kLong);
    return {i.to(at::kFloat).unsqueeze(1).repeat({1, 2}), i, {}};
  }
};

TEST(GpuPinnedMemory, WorkersAndTheCallingThreadPinTheirBatches) {
  PIPELAB_REQUIRE_GPU();
  for (const int workers : {0, 1}) {
    for (const bool pin : {false, true}) {
      LoaderOptions o{4, false, true, 0, PrefetchOptions{}};
      o.prefetch.workers = workers;
      o.pin = pin;
      DataLoader loader(std::make_shared<Eight>(), o);
      const Batch b = loader.batch(1);
      EXPECT_EQ(b.x.is_pinned(), pin) << workers << " workers";
      EXPECT_EQ(b.y.is_pinned(), pin) << workers << " workers";
      EXPECT_EQ(b.y[0].item<int64_t>(), 4);
    }
  }
}

}  // namespace
}  // namespace pipelab::gpu_training_test
