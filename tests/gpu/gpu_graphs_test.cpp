// run.cuda_graphs (core/stage/stage_graphs.h): a captured run gives the bits of an
// uncaptured one, for every registered scheme at 2 and 4 stages, on both executors, in
// float32, bf16 and fp16 with channels-last; a stage captures once per in-flight micro-batch
// and replays after; what cannot be captured is refused with a message that says why.
#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include "core/model/model.h"
#include "core/nn/dropout.h"
#include "core/stage/stage.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"

namespace pipelab::gpu_graphs_test {
namespace {

const char* const kMlp = testing::kGpuMlp;

class GpuCudaGraphs : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(GpuCudaGraphs, CapturedEqualsEagerBitwise) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  const testing::SchemeCase& c = GetParam();
  const std::vector<std::string> common{"scheme=" + c.scheme, fmt::format("partition.stages={}", c.stages)};
  auto with = [&](bool graphs) {
    std::vector<std::string> o = common;
    o.push_back(fmt::format("run.cuda_graphs={}", graphs));
    return testing::train(kMlp, o);
  };
  const Experiment e = testing::experiment(kMlp, "", common);
  if (e.scheme->add_ons()->routes_own_gradients()) {
    // Local-loss schemes run their own autograd on each forward's graph: refused up front.
    EXPECT_NE(testing::user_error([&] { with(true); }).find("run.cuda_graphs"), std::string::npos);
    return;
  }
  const TensorDict eager = with(false);
  const TensorDict captured = with(true);
  EXPECT_TRUE(testing::identical(eager, captured)) << "max difference " << testing::max_difference(eager, captured);
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuCudaGraphs, ::testing::ValuesIn(testing::scheme_cases()), testing::scheme_case_name);

TEST(GpuCudaGraphsExecutors, ThreadedCapturedEqualsSequentialEager) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  // Four stages capturing and replaying on four streams at once, against one eager thread.
  for (const char* scheme : {"{type: gpipe, chunks: 4}", "{type: pipedream_flush, chunks: 4}", "{type: zb_h1, chunks: 4}"}) {
    const std::vector<std::string> common{std::string("scheme=") + scheme, "partition.stages=4"};
    std::vector<std::string> eager = common, captured = common;
    eager.push_back("run.executor=sequential");
    captured.push_back("run.executor={type: threaded, intra_op_threads: 1}");
    captured.push_back("run.cuda_graphs=true");
    const TensorDict a = testing::train(kMlp, eager), b = testing::train(kMlp, captured);
    EXPECT_TRUE(testing::identical(a, b)) << scheme << ": max difference " << testing::max_difference(a, b);
  }
}

TEST(GpuCudaGraphsPrecision, MixedPrecisionChannelsLastResNetMatchesEager) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  const char* resnet = R"(
model:     {type: resnet, depth: 18, stem: cifar}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [3, 32, 32], classes: 10}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 5, channels_last: true, devices: [cuda:0]}
)";
  for (const char* amp : {"bf16", "fp16", "none"}) {
    const std::vector<std::string> common{std::string("run.amp=") + amp};
    std::vector<std::string> captured = common;
    captured.push_back("run.cuda_graphs=true");
    const TensorDict a = testing::train(resnet, common), b = testing::train(resnet, captured);
    EXPECT_TRUE(testing::identical(a, b)) << amp << ": max difference " << testing::max_difference(a, b);
  }
}

/// A stage of Linear, ReLU, dropout (on its own CUDA generator) and Linear with cross-entropy
/// on cuda:0.
std::unique_ptr<Stage> linear_stage(bool graphs) {
  torch::manual_seed(7);
  StageSpec spec;
  spec.device = c10::Device(c10::kCUDA, 0);
  spec.blocks = {{"fc1", torch::nn::AnyModule(torch::nn::Linear(32, 64))},
                 {"relu", torch::nn::AnyModule(torch::nn::ReLU())},
                 {"drop", torch::nn::AnyModule(nn::Dropout(0.2))},
                 {"fc2", torch::nn::AnyModule(torch::nn::Linear(64, 10))}};
  spec.loss = std::make_shared<CrossEntropyLoss>();
  spec.cuda_graphs = graphs;
  return std::make_unique<Stage>(std::move(spec));
}

TEST(GpuCudaGraphsSlots, OneCapturePerInFlightMicroBatchThenReplays) {
  PIPELAB_REQUIRE_GPU();
  testing::deterministic_cuda();
  auto eager = linear_stage(false), graphed = linear_stage(true);
  const auto gpu = at::TensorOptions().device(c10::kCUDA, 0);
  ForwardOptions options;
  const auto step = [&](Stage& s, int in_flight, int seed) {
    at::manual_seed(seed);
    std::vector<at::Tensor> x;
    for (int mb = 0; mb < in_flight; ++mb) x.push_back(at::randn({8, 32}, gpu));
    options.target = at::randint(10, {8}, gpu.dtype(at::kLong));
    options.loss_scale = 0.5;  // part of the signature: the same in every step
    std::vector<double> losses;
    for (int mb = 0; mb < in_flight; ++mb) losses.push_back(s.forward(mb, x[mb], options).loss.item<double>());
    for (int mb = 0; mb < in_flight; ++mb) s.backward(mb, at::Tensor());
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : s.parameters()) grads.push_back(p.grad().clone());
    for (const at::Tensor& p : s.parameters()) p.mutable_grad() = at::Tensor();
    return std::make_pair(losses, grads);
  };
  // Step 1 warms up (eager); step 2 captures two forwards (two in flight); step 3 replays
  // them; a step with three in flight captures one more.
  const std::vector<std::pair<int, size_t>> plan{{2, 0}, {2, 2}, {2, 2}, {3, 3}, {1, 3}};
  int seed = 0;
  for (const auto& [in_flight, slots] : plan) {
    const auto a = step(*eager, in_flight, ++seed);
    const auto b = step(*graphed, in_flight, seed);
    EXPECT_EQ(graphed->captured_forwards(), slots) << "after step " << seed;
    EXPECT_EQ(a.first, b.first) << "losses of step " << seed;
    for (size_t i = 0; i < a.second.size(); ++i) EXPECT_TRUE(at::equal(a.second[i], b.second[i])) << "step " << seed;
  }
}

TEST(GpuCudaGraphsRefusals, WhatCannotBeCapturedSaysWhy) {
  PIPELAB_REQUIRE_GPU();
  // Deferred batch norm accumulates its moments on the host.
  const std::string deferred = testing::user_error([] {
    testing::train(kMlp, {"scheme={type: gpipe, chunks: 2, deferred_batch_norm: true}", "run.cuda_graphs=true"});
  });
  EXPECT_NE(deferred.find("deferred batch norm"), std::string::npos) << deferred;
  EXPECT_NE(deferred.find("run.cuda_graphs: false"), std::string::npos) << deferred;
}

}  // namespace
}  // namespace pipelab::gpu_graphs_test
