// A cost model per operator class and `pipelab calibrate`'s fit (docs/simulate.md,
// "Calibrated costs"): the FLOP counter sorts a model's operators into classes by hand-counted
// sizes; a block's seconds by class are hand-computed; the least squares with non-negative
// unknowns is checked against every active set; a fit of stages made from known rates gets
// the rates back; and a cluster file refuses a class faster than its device.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <fmt/format.h>

#include <filesystem>
#include <random>

#include "core/model/flop_counter.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tools/simulate/calibration.h"
#include "tools/simulate/class_rates.h"
#include "tools/simulate/cluster.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/nnls.h"

namespace pipelab::calibration_test {
namespace {

int64_t of(const FlopCounter& c, OpClass k) { return c.by_class()[static_cast<size_t>(k)]; }

TEST(OpClasses, EachOperatorCountsInItsClass) {
  torch::NoGradGuard no_grad;
  torch::nn::Linear linear(8, 4);
  torch::nn::Conv2d dense(torch::nn::Conv2dOptions(4, 6, 3).padding(1));
  torch::nn::Conv2d depthwise(torch::nn::Conv2dOptions(4, 4, 3).padding(1).groups(4));
  torch::nn::Conv2d pointwise(torch::nn::Conv2dOptions(4, 6, 1));
  // The inputs are made before the counter starts: filling them is work too.
  const at::Tensor x = torch::zeros({2, 8}), image = torch::zeros({1, 4, 5, 5});
  const at::Tensor q = torch::zeros({2, 3, 5}), k = torch::zeros({2, 5, 7});
  FlopCounter counter;
  std::set<const void*> weights;
  const std::vector<torch::nn::Module*> modules{linear.ptr().get(), dense.ptr().get(), depthwise.ptr().get(),
                                                 pointwise.ptr().get()};
  for (torch::nn::Module* m : modules) {
    for (const at::Tensor& p : m->parameters()) weights.insert(p.storage().unsafeGetStorageImpl());
  }
  counter.set_weights(weights);
  linear(x);                                                      // 2 x 8 x 4 multiply-adds
  torch::bmm(q, k);                                               // 2 x 3 x 7 x 5, no weight
  dense(image);                                                   // 25 x 6 outputs x 4 x 9
  depthwise(image);                                               // 25 x 4 outputs x 1 x 9
  pointwise(image);                                               // 25 x 6 outputs x 4
  torch::relu(image);                                             // 100 floats in, 100 out
  EXPECT_EQ(of(counter, OpClass::Gemm), 2 * 2 * 8 * 4);
  EXPECT_EQ(of(counter, OpClass::Attention), 2 * 2 * 3 * 7 * 5);
  EXPECT_EQ(of(counter, OpClass::Conv), 2 * 25 * 6 * 4 * 9);
  EXPECT_EQ(of(counter, OpClass::DepthwiseConv), 2 * 25 * 4 * 9);
  EXPECT_EQ(of(counter, OpClass::PointwiseConv), 2 * 25 * 6 * 4);
  EXPECT_EQ(counter.memory_bytes(), 2 * 100 * 4);
  int64_t sum = 0;
  for (const int64_t f : counter.by_class()) sum += f;
  EXPECT_EQ(sum, counter.flops());
}

TEST(OpClasses, ABlocksSecondsByClassByHand) {
  // 1000 GEMM FLOPs at half of 1 GFLOP/s, 600 attention FLOPs at a tenth, 40 bytes of
  // element-wise kernels at a quarter of 1 GB/s, per example, 2 examples. The GEMM's operands
  // (600 bytes) take longer than its FLOPs at that bandwidth; attention's (10) do not.
  BlockProfile b;
  b.class_flops[static_cast<size_t>(OpClass::Gemm)] = 1000;
  b.class_flops[static_cast<size_t>(OpClass::Attention)] = 600;
  b.class_bytes[static_cast<size_t>(OpClass::Gemm)] = 600;
  b.class_bytes[static_cast<size_t>(OpClass::Attention)] = 10;
  b.memory_bytes = 40;
  sim::ClassRates r;
  r.forward.compute[static_cast<size_t>(OpClass::Gemm)] = 0.5;
  r.forward.compute[static_cast<size_t>(OpClass::Attention)] = 0.1;
  r.forward.memory = 0.25;
  const sim::ClassSeconds t = sim::class_seconds(b, 2, r, sim::ClassDevice{1e9, 0, 1e9, 1.0});
  const double gemm = 1200 / 0.25e9, attention = 1200 / 0.1e9, bytes = 80 / 0.25e9;
  ASSERT_GT(gemm, 2000 / 0.5e9);  // bound by its bytes
  EXPECT_DOUBLE_EQ(t.forward, gemm + attention + bytes);
  EXPECT_DOUBLE_EQ(t.input_backward, gemm + 2 * attention + 2 * bytes);
  EXPECT_DOUBLE_EQ(t.weight_backward, gemm);
  // Convolutions at their own rate where the device gives one (TensorFloat-32 under float32).
  BlockProfile conv;
  conv.class_flops[static_cast<size_t>(OpClass::Conv)] = 1000;
  conv.class_flops[static_cast<size_t>(OpClass::Gemm)] = 100;
  EXPECT_DOUBLE_EQ(sim::class_seconds(conv, 1, r, sim::ClassDevice{1e9, 4e9, 0, 1.0}).forward,
                   1000 / 4e9 + 100 / 0.5e9);
  // derive_costs prices a block by class when the device has class rates.
  sim::DeviceSpec device;
  device.tflops = 1e-3;
  device.memory_gbs = 1;
  device.classes = r;
  b.output_shape = {1};
  b.live = {{"x", {1}, 4, true}};
  const sim::SimCosts c = sim::derive_costs({b}, sim::estimated_block_memory({b}), {1}, 2, device);
  EXPECT_NEAR(c.stages[0].seconds[ActionKind::Forward], gemm + attention + bytes, 1e-15);
}

/// The best x >= 0 by brute force: every support's unconstrained solution that is >= 0.
double best_residual(const at::Tensor& a, const at::Tensor& b) {
  const int64_t n = a.size(1);
  double best = b.norm().item<double>();
  for (int64_t mask = 1; mask < (1 << n); ++mask) {
    std::vector<int64_t> cols;
    for (int64_t j = 0; j < n; ++j) {
      if (mask & (1 << j)) cols.push_back(j);
    }
    const at::Tensor sub = a.index_select(1, at::tensor(cols, at::kLong));
    const at::Tensor z = std::get<0>(at::linalg_lstsq(sub, b.unsqueeze(1), c10::nullopt, "gelsd")).squeeze(1);
    if ((z < 0).any().item<bool>()) continue;
    best = std::min(best, (at::mv(sub, z) - b).norm().item<double>());
  }
  return best;
}

TEST(Nnls, MatchesEveryActiveSetOnRandomProblems) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t rows = 3 + static_cast<int64_t>(rng() % 8), cols = 1 + static_cast<int64_t>(rng() % 5);
    torch::manual_seed(trial);
    const at::Tensor a = torch::randn({rows, cols}, at::kDouble), b = torch::randn({rows}, at::kDouble);
    const std::vector<double> av(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
    const std::vector<double> bv(b.data_ptr<double>(), b.data_ptr<double>() + b.numel());
    const std::vector<double> x = sim::nnls(av, bv);
    ASSERT_EQ(x.size(), static_cast<size_t>(cols));
    for (const double v : x) EXPECT_GE(v, 0);
    const double residual = (at::mv(a, at::tensor(x, at::kDouble)) - b).norm().item<double>();
    EXPECT_NEAR(residual, best_residual(a, b), 1e-9) << "trial " << trial;
  }
}

TEST(Calibration, StagesMadeFromKnownRatesGiveThemBack) {
  // Forwards: GEMMs at 2 TFLOP/s and 1 us a call, convolutions at 0.5 and 20 us, depthwise
  // at 0.05, 20 GB/s for the rest; backwards (twice the work): convolutions at 0.25,
  // the others as their forwards; 3 us a kernel and 40 us an action. Every stage's seconds
  // are made from them.
  constexpr size_t kGemm = static_cast<size_t>(OpClass::Gemm), kConv = static_cast<size_t>(OpClass::Conv),
                   kDepthwise = static_cast<size_t>(OpClass::DepthwiseConv);
  const double gemm = 1 / 2e12, conv = 1 / 0.5e12, conv_back = 1 / 0.25e12, depthwise = 1 / 0.05e12, byte = 1 / 20e9;
  const double gemm_call = 1e-6, conv_call = 20e-6, launch = 3e-6, action = 40e-6;
  std::vector<sim::StageSample> samples;
  std::mt19937 rng(3);
  const auto draw = [&rng](double unit, int n) { return unit * static_cast<double>(rng() % n); };
  for (int s = 0; s < 30; ++s) {
    sim::StageSample x;
    x.flops[kGemm] = draw(1e6, 100);
    x.calls[kGemm] = draw(1, 20);
    x.flops[kConv] = s % 2 ? draw(1e6, 50) : 0;
    x.calls[kConv] = x.flops[kConv] > 0 ? 1 + draw(1, 10) : 0;
    x.flops[kDepthwise] = s % 3 ? draw(1e5, 50) : 0;
    x.calls[kDepthwise] = x.flops[kDepthwise] > 0 ? 1 + draw(1, 5) : 0;
    x.memory_bytes = draw(1e4, 80);
    x.kernels = 30 + draw(1, 40);
    x.examples = 8;
    const double fixed = x.calls[kGemm] * gemm_call + x.calls[kConv] * conv_call;
    const double others = (x.flops[kGemm] * gemm + x.flops[kDepthwise] * depthwise + x.memory_bytes * byte) * 8;
    x.forward = others + x.flops[kConv] * conv * 8 + fixed + x.kernels * launch + action;
    x.backward = 2 * (others + x.flops[kConv] * conv_back * 8 + fixed + x.kernels * launch) + action;
    samples.push_back(x);
  }
  const sim::Calibration fit = sim::fit_calibration(samples);
  EXPECT_NEAR(fit.forward.per_flop[kGemm] / gemm, 1, 1e-6);
  EXPECT_NEAR(fit.forward.per_flop[kConv] / conv, 1, 1e-6);
  EXPECT_NEAR(fit.backward.per_flop[kConv] / conv_back, 1, 1e-6);
  EXPECT_NEAR(fit.forward.per_flop[kDepthwise] / depthwise, 1, 1e-6);
  EXPECT_NEAR(fit.backward.per_flop[kDepthwise] / depthwise, 1, 1e-6);
  EXPECT_NEAR(fit.forward.per_call[kConv] / conv_call, 1, 1e-6);
  EXPECT_NEAR(fit.backward.per_call[kGemm] / gemm_call, 1, 1e-6);
  EXPECT_NEAR(fit.forward.per_byte / byte, 1, 1e-6);
  EXPECT_NEAR(fit.launch_seconds / launch, 1, 1e-6);
  EXPECT_NEAR(fit.action_seconds / action, 1, 1e-6);
  EXPECT_LT(fit.rms_error, 1e-9);
  EXPECT_FALSE(fit.seen[static_cast<size_t>(OpClass::Attention)]);
  // As a device: the fastest class's rate, each class its fraction of it.
  const sim::ClusterDevice d = sim::calibrated_device(fit, "float32", 16);
  EXPECT_NEAR(d.tflops.float32, 2, 1e-5);
  EXPECT_NEAR(d.classes.forward.compute[kConv], 0.25, 1e-6);
  EXPECT_NEAR(d.classes.backward.compute[kConv], 0.125, 1e-6);
  EXPECT_NEAR(d.classes.forward.compute[kDepthwise], 0.025, 1e-6);
  EXPECT_NEAR(d.classes.forward.call_us[kConv], 20, 1e-4);
  EXPECT_EQ(d.classes.forward.compute[static_cast<size_t>(OpClass::Attention)], 0);
  EXPECT_NEAR(d.memory_gbs, 20, 1e-4);
  EXPECT_NEAR(d.launch_us, 3, 1e-5);
  // And priced back by class: a block of each class costs what the stages were made of.
  BlockProfile block;
  block.class_flops[kConv] = 1000000;
  block.class_calls[kConv] = 2;
  const sim::ClassSeconds t =
      sim::class_seconds(block, 8, d.classes, sim::ClassDevice{d.tflops.float32 * 1e12, 0, d.memory_gbs * 1e9, 1});
  EXPECT_NEAR(t.forward / (8e6 * conv + 2 * conv_call), 1, 1e-6);
  EXPECT_NEAR((t.input_backward + t.weight_backward) / (2 * (8e6 * conv_back + 2 * conv_call)), 1, 1e-6);
}

TEST(Calibration, OneByOneConvolutionsAreFittedWithTheGemmsUnlessAskedApart) {
  // 1 x 1 convolutions at 1 TFLOP/s, GEMMs at 2: by default one rate for both (the fit's
  // compromise, the same for the two classes); apart, each its own.
  constexpr size_t kGemm = static_cast<size_t>(OpClass::Gemm), kPointwise = static_cast<size_t>(OpClass::PointwiseConv);
  std::vector<sim::StageSample> samples;
  for (int s = 0; s < 8; ++s) {
    sim::StageSample x;
    x.flops[kGemm] = 1e6 * (1 + s % 3);
    x.flops[kPointwise] = 1e6 * (1 + s % 4);
    x.examples = 1;
    x.forward = x.flops[kGemm] / 2e12 + x.flops[kPointwise] / 1e12;
    x.backward = 2 * x.forward;
    samples.push_back(x);
  }
  const sim::Calibration together = sim::fit_calibration(samples);
  EXPECT_EQ(together.forward.per_flop[kPointwise], together.forward.per_flop[kGemm]);
  EXPECT_GT(together.rms_error, 0.01);
  sim::CalibrationOptions apart;
  apart.pointwise_as_gemm = false;
  const sim::Calibration separate = sim::fit_calibration(samples, apart);
  EXPECT_NEAR(separate.forward.per_flop[kGemm] * 2e12, 1, 1e-6);
  EXPECT_NEAR(separate.forward.per_flop[kPointwise] * 1e12, 1, 1e-6);
}

TEST(Calibration, ClusterFileRoundTripsAndRefusesAClassAboveItsDevice) {
  testing::TempDir dir;
  sim::Cluster c;
  c.name = "x";
  c.source = "y";
  c.device.tflops.float32 = 2;
  c.device.memory_gbs = 20;
  c.device.memory_gib = 16;
  c.device.classes.forward.compute[static_cast<size_t>(OpClass::Conv)] = 0.25;
  c.device.classes.backward.call_us[static_cast<size_t>(OpClass::Conv)] = 7;
  c.device.classes.forward.memory = 1;
  c.link.gbps = 100;
  testing::write_text(dir.file("c.yaml"), sim::cluster_yaml(c));
  const sim::Cluster back = sim::load_cluster(dir.file("c.yaml"));
  EXPECT_EQ(back.device.classes.forward.compute[static_cast<size_t>(OpClass::Conv)], 0.25);
  EXPECT_EQ(back.device.classes.backward.call_us[static_cast<size_t>(OpClass::Conv)], 7);
  EXPECT_EQ(back.device.classes.forward.memory, 1);
  EXPECT_TRUE(back.device.classes.given());
  testing::write_text(dir.file("bad.yaml"),
                      "name: x\nsource: y\ndevice: {tflops: {float32: 2}, memory_gbs: 20, memory_gib: 16, "
                      "classes: {conv: 1.5}}\nlink: {gbps: 100}\n");
  try {
    sim::load_cluster(dir.file("bad.yaml"));
    FAIL() << "a class at 1.5 times its device's rate was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("device.classes.conv"), std::string::npos) << e.what();
  }
}

/// A traced run of `model` on 2 stages of this CPU, in `dir`/`name`.
std::string traced_run(const testing::TempDir& dir, const std::string& name, const std::string& model,
                       const std::string& dataset, bool trace = true) {
  testing::write_text(dir.file(name + ".yaml"),
                      fmt::format("model: {}\ndataset: {}\npartition: {{stages: 2}}\nscheme: {{type: gpipe, chunks: 2}}\n"
                                  "optimizer: {{type: sgd, lr: 0.01}}\nrun: {{epochs: 1, batch_size: 8, seed: 0, "
                                  "executor: sequential, threads: 1, trace: {}, progress: false}}\n",
                                  model, dataset, trace));
  const auto [code, out] =
      testing::pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file(name + ".yaml"), dir.file(name)));
  EXPECT_EQ(code, 0) << out;
  return dir.file(name);
}

TEST(Calibrate, FitsTracedRunsOfTwoModelsAndSaysWhatItNeedsElse) {
  testing::TempDir dir;
  const std::string flat = "{type: synthetic, samples: 32, test_samples: 8, shape: [16], classes: 4}";
  const std::string mlp = traced_run(dir, "mlp", "{type: mlp, sizes: [16, 64, 64, 4]}", flat);
  const std::string cnn = traced_run(dir, "cnn", "{type: cnn, channels: [4, 8], hidden: 16}",
                                     "{type: synthetic, samples: 32, test_samples: 8, shape: [1, 8, 8], classes: 4}");
  auto [code, out] = testing::pipelab(fmt::format("calibrate {} {} -o {}", mlp, cnn, dir.file("c.yaml")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("gemm"), std::string::npos) << out;
  EXPECT_NE(out.find("conv"), std::string::npos) << out;
  // The file is a cluster file the simulator prices by class.
  const sim::Cluster c = sim::load_cluster(dir.file("c.yaml"));
  EXPECT_TRUE(c.device.classes.given());
  EXPECT_GT(c.device.tflops.float32, 0);
  std::tie(code, out) = testing::pipelab(fmt::format("simulate {} --cluster {}", dir.file("mlp.yaml"), dir.file("c.yaml")));
  EXPECT_EQ(code, 0) << out;
  // One model cannot tell its classes apart; a folder without a trace has nothing to fit.
  std::tie(code, out) = testing::pipelab(fmt::format("calibrate {} -o {}", mlp, dir.file("d.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("at least two models"), std::string::npos) << out;
  const std::string untraced = traced_run(dir, "plain", "{type: mlp, sizes: [16, 32, 4]}", flat, false);
  std::tie(code, out) = testing::pipelab(fmt::format("calibrate {} {} -o {}", mlp, untraced, dir.file("d.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("run.trace: true"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("d.yaml")));
}

}  // namespace
}  // namespace pipelab::calibration_test
