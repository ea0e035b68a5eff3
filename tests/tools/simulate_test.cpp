// pipelab simulate: the event replay against timelines computed by hand (links with bandwidth
// and latency, with and without overlap; the ring all-reduce), memory per device, the
// steady state of a pipeline that is never flushed, costs files, derived costs, and the
// command's output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/config/registry.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"
#include "tools/describe/model_profile.h"
#include "tools/simulate/block_memory.h"
#include "tools/simulate/block_times.h"
#include "tools/simulate/derive.h"
#include "tools/simulate/report.h"
#include "tools/simulate/svg_timeline.h"

namespace pipelab::simulate_test {
namespace {

/// A 2-stage GPipe of a small MLP, 2 micro-batches of 8 examples.
constexpr const char* kTwoStageMlp =
    "model: {type: mlp, sizes: [8, 16, 16, 4]}\n"
    "dataset: {type: synthetic, samples: 64, shape: [8], classes: 4}\n"
    "partition: {stages: 2}\nscheme: {type: gpipe, chunks: 2}\n"
    "optimizer: {type: sgd, lr: 0.1}\nrun: {epochs: 1, batch_size: 16}\n";

std::unique_ptr<Scheme> scheme(const std::string& yaml) {
  return Registry<Scheme>::get().create(ConfigNode(YAML::Load(yaml), std::make_shared<ConfigSource>("t"), "scheme"));
}

/// `stages` stages with F = 1 s, B = 2 s; a link of 1 byte/s (8e-9 Gbit/s).
sim::SimCosts uniform(int stages, double bytes = 0, double latency_s = 0) {
  sim::SimCosts c;
  for (int s = 0; s < stages; ++s) {
    sim::StageCosts k;
    k.seconds[ActionKind::Forward] = 1;
    k.seconds[ActionKind::Backward] = 2;
    k.activation_bytes = s + 1 < stages ? bytes : 0;
    k.gradient_bytes = s > 0 ? bytes : 0;
    c.stages.push_back(k);
  }
  c.link.gbps = 8e-9;
  c.link.latency_us = latency_s * 1e6;
  return c;
}

TEST(Simulate, LinksByHand) {
  // GPipe, 2 stages, 2 micro-batches; each message occupies the link 0.5 s and arrives 0.25 s
  // later. Overlapping: d0 F0 [0,1] F1 [1,2]; F0's message on the link [1,1.5], arrives 1.75;
  // F1's [2,2.5], arrives 2.75. d1 F0 [1.75,2.75] F1 [2.75,3.75] B1 [3.75,5.75] (message
  // arrives 6.5) B0 [5.75,7.75] (arrives 8.5). d0 B1 [6.5,8.5] B0 [8.5,10.5].
  const auto gpipe = scheme("{type: gpipe, chunks: 2, checkpoint: never}");
  sim::SimOptions o;
  sim::SimResult r = sim::simulate(*gpipe, 2, 2, 1, uniform(2, 0.5, 0.25), o);
  EXPECT_DOUBLE_EQ(r.makespan, 10.5);
  EXPECT_DOUBLE_EQ(r.step_seconds, 10.5);
  EXPECT_DOUBLE_EQ(r.bubble, 1 - 12.0 / 21.0);
  EXPECT_DOUBLE_EQ(r.bytes_per_step, 4 * 0.5);
  ASSERT_EQ(r.timeline.transfers.size(), 4u);
  EXPECT_DOUBLE_EQ(r.timeline.transfers[1].start, 2);
  EXPECT_DOUBLE_EQ(r.timeline.transfers[1].end, 2.75);
  // Blocking sends: d0 F0 [0,1], send until 1.75; F1 [1.75,2.75], send [2.75,3.5]. d1 F0
  // [1.75,2.75] F1 [3.5,4.5] B1 [4.5,6.5] send until 7.25, B0 [7.25,9.25] send until 10.
  // d0 B1 [7.25,9.25] B0 [10,12].
  o.overlap = false;
  r = sim::simulate(*gpipe, 2, 2, 1, uniform(2, 0.5, 0.25), o);
  EXPECT_DOUBLE_EQ(r.makespan, 12);
  // A slow device: d1 at 2x makes its F 2 s and B 4 s: d1 F0 [1.75,3.75] F1 [3.75,5.75]
  // B1 [5.75,9.75] B0 [9.75,13.75] -> d0 B0 ends 13.75 + 0.75 + 2 = 16.5.
  o.overlap = true;
  o.slow[1] = 2;
  r = sim::simulate(*gpipe, 2, 2, 1, uniform(2, 0.5, 0.25), o);
  EXPECT_DOUBLE_EQ(r.makespan, 16.5);
  // One worker (the sequential executor): the sum of every action, messages free.
  o = {};
  o.one_worker = true;
  r = sim::simulate(*gpipe, 2, 2, 1, uniform(2), o);
  EXPECT_DOUBLE_EQ(r.makespan, 2 * 2 * 3.0);
}

TEST(Simulate, RingAllReduceByHand) {
  // 4 replicas, 3 bytes of gradient, 1 byte/s, 0.1 s latency: 2 * 3/4 * 3 = 4.5 s on the
  // wire plus 2 * 3 latencies = 5.1 s after F + B = 3 s, then U = 0.5 s.
  sim::SimCosts c = uniform(1, 0, 0.1);
  for (sim::StageCosts& k : c.stages) {
    k.parameter_bytes = 3;
    k.seconds[ActionKind::Update] = 0.5;
  }
  const auto dp = scheme("{type: dp, replicas: 4}");
  sim::SimOptions four;
  four.replicas = 4;  // dp = one stage with 4 replicas
  const sim::SimResult r = sim::simulate(*dp, 1, 1, 8, c, four);
  EXPECT_EQ(r.devices, 4);
  EXPECT_NEAR(r.step_seconds, 3 + 5.1 + 0.5, 1e-12);
  EXPECT_NEAR(r.bytes_per_step, 4 * 4.5, 1e-12);
  EXPECT_NEAR(r.samples_per_second, 4 * 8 / 8.6, 1e-9);
  // dp steps after every unit: 8 units are 8 steps, each with one all-reduce of the
  // formula's bytes and the same time, however many units the replay holds.
  const sim::SimResult eight = sim::simulate(*dp, 1, 8, 8, c, four);
  EXPECT_NEAR(eight.bytes_per_step, 4 * 4.5, 1e-12);
  EXPECT_NEAR(eight.step_seconds, 3 + 5.1 + 0.5, 1e-9);
  EXPECT_NEAR(eight.samples_per_second, 4 * 8 / 8.6, 1e-9);
  // Through one host's memory at 3 bytes/s (the threaded executor's replicas), messages
  // still on the link: the 4.5 ring bytes take 1.5 s, plus the same 0.6 s of latencies.
  c.link.reduce_gbps = 24e-9;
  EXPECT_NEAR(sim::simulate(*dp, 1, 1, 8, c, four).step_seconds, 3 + 1.5 + 0.6 + 0.5, 1e-12);
  c.link.gbps = 0;  // an infinite link leaves the all-reduce its memory's time
  EXPECT_NEAR(sim::simulate(*dp, 1, 1, 8, c, four).step_seconds, 3 + 1.5 + 0.6 + 0.5, 1e-12);
}

TEST(Simulate, MemoryByHand) {
  sim::SimCosts c = uniform(2, 20);
  for (sim::StageCosts& k : c.stages) {
    k.retained_bytes = 100;
    k.parameter_bytes = 10;
    k.optimizer_bytes = 10;
    k.buffer_bytes = 1;
  }
  // GPipe without checkpointing keeps all 4 micro-batches; weights, the gradient, the
  // optimizer's last gradient, its state and buffers: 10 + 10 + 10 + 10 + 1.
  sim::SimResult r = sim::simulate(*scheme("{type: gpipe, chunks: 4, checkpoint: never}"), 2, 4, 1, c, {});
  EXPECT_EQ(r.static_bytes, (std::vector<double>{41, 41}));
  EXPECT_EQ(r.peak_activation_bytes, (std::vector<double>{400, 400}));
  EXPECT_EQ(r.peak_bytes, (std::vector<double>{441, 441}));
  // 1F1B keeps D - r; and the gradient stage 1 sent back for micro-batch 0 (20) stays until
  // stage 0's backward of it ends, while stage 1's F of micro-batch 1 runs: 100 + 20.
  r = sim::simulate(*scheme("{type: pipedream_flush, chunks: 4}"), 2, 4, 1, c, {});
  EXPECT_EQ(r.peak_activation_bytes, (std::vector<double>{200, 120}));
  // Checkpointing: stage 1 keeps nothing of its own (its inputs are what stage 0 sent, and
  // count there: 4 x 20 until stage 1's backwards of them end), and each backward recomputes
  // its 100 bytes; the gradients it sends back take 20 s each on the link (1 byte/s), so
  // by its last backward it holds three of them: 100 + 60. Stage 0's backwards start when
  // the last one has gone: its peak is a recomputation's 100.
  r = sim::simulate(*scheme("{type: gpipe, chunks: 4, checkpoint: always}"), 2, 4, 1, c, {});
  EXPECT_EQ(r.peak_activation_bytes, (std::vector<double>{100, 160}));
  // With measured transients (which include the recomputation) a micro-batch gives back what
  // it held and no more: the curve ends at the static bytes. Stage 1's first backward: a
  // 30-byte transient less the 10-byte gradient it makes (the static bytes hold it); its
  // last: the three gradients it sent and still holds + 30.
  for (sim::StageCosts& k : c.stages) k.transient_bytes[ActionKind::Backward] = 30;
  r = sim::simulate(*scheme("{type: gpipe, chunks: 4, checkpoint: always}"), 2, 4, 1, c, {});
  EXPECT_EQ(r.memory[1].back().bytes, r.static_bytes[1]);
  EXPECT_EQ(r.peak_activation_bytes[1], 60 + 30);
  // PipeDream stashes D - r versions: stage 0 of 4 holds 4 weight versions + 2 gradients.
  r = sim::simulate(*scheme("{type: pipedream}"), 4, 8, 1, [&] {
    sim::SimCosts four = uniform(4, 20);
    for (sim::StageCosts& k : four.stages) k.parameter_bytes = 10;
    return four;
  }(), {});
  EXPECT_EQ(r.static_bytes, (std::vector<double>{60, 50, 40, 30}));
  // The curve starts at the static bytes and ends there (every micro-batch done).
  EXPECT_EQ(r.memory[0].front().bytes, 60);
  EXPECT_EQ(r.memory[0].back().bytes, 60);
}

TEST(Simulate, SteadyStateOfAPipelineNeverFlushed) {
  // PipeDream's 1F1B on 4 balanced stages: once full, one mini-batch per F + B = 3 s, no idle.
  const sim::SimResult r = sim::simulate(*scheme("{type: pipedream}"), 4, 16, 32, uniform(4), {});
  EXPECT_NEAR(r.step_seconds, 3, 1e-12);
  EXPECT_NEAR(r.bubble, 0, 1e-12);
  EXPECT_NEAR(r.samples_per_second, 32 / 3.0, 1e-12);
}

TEST(Simulate, CostsFiles) {
  testing::TempDir dir;
  testing::write_text(dir.file("c.yaml"),
                      "micro_batch_size: 8\nlink: {gbps: 100, latency_us: 5}\nstages:\n"
                      "  - {forward: 0.01, backward: 0.02, activation_bytes: 4096, retained_bytes: 1e6}\n"
                      "  - {forward: 0.02, backward: 0.04, gradient_bytes: 4096}\n");
  const sim::SimCosts c = sim::load_costs(dir.file("c.yaml"));
  ASSERT_EQ(c.stages.size(), 2u);
  EXPECT_EQ(c.stages[0].retained_bytes, 1e6);
  EXPECT_EQ(c.link.gbps, 100);
  EXPECT_EQ(c.source, "given: " + dir.file("c.yaml"));
  // Half the examples: half the seconds and activation bytes, the same weights.
  const sim::SimCosts half = c.scaled_to(4);
  EXPECT_DOUBLE_EQ(half.stages[1].seconds[ActionKind::Forward], 0.01);
  EXPECT_DOUBLE_EQ(half.stages[0].activation_bytes, 2048);
  EXPECT_DOUBLE_EQ(c.stages[0].seconds_of(ActionKind::BackwardInput), 0.01);  // half of B when I is not given
  testing::write_text(dir.file("bad.yaml"), "stages:\n  - {forward: 0.01, backwrd: 0.02}\n");
  std::string why = testing::user_error([&] { sim::load_costs(dir.file("bad.yaml")); });
  EXPECT_NE(why.find("bad.yaml:2:"), std::string::npos) << why;
  EXPECT_NE(why.find("backwrd"), std::string::npos) << why;
  EXPECT_NE(why.find("backward"), std::string::npos) << why;
  testing::write_text(dir.file("none.yaml"), "link: {gbps: 1}\n");
  why = testing::user_error([&] { sim::load_costs(dir.file("none.yaml")); });
  EXPECT_NE(why.find("no `stages` list"), std::string::npos) << why;
}

// A run measured on a GPU: costs.json holds each stage's GPU and that GPU's caching-allocator
// peak, and the replay of its own costs sets beside it the simulated devices' whole peaks
// (weights, gradients and optimizer state included) summed: here 2 x (1 + 2 x 1 + 1) MiB
// against 10 MiB measured.
TEST(Simulate, AGpuRunIsCheckedAgainstItsCachingAllocator) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kTwoStageMlp);
  const std::string stage =
      R"("forward": 0.001, "backward": 0.002, "parameter_bytes": 1048576, "optimizer_bytes": 1048576,
         "cuda_device": 0, "cuda_allocated_peak_bytes": 10485760, "cuda_reserved_peak_bytes": 16777216)";
  testing::write_text(dir.file("c.json"),
                      R"({"scheme": "gpipe", "executor": "threaded", "micro_batches": 2, "micro_batch_size": 8,
                          "step_seconds": 0.015, "steps": 4, "stages": [{"stage": 0, "device": 0, )" +
                          stage + R"(}, {"stage": 1, "device": 1, )" + stage + "}]}\n");
  const auto [code, out] = testing::shell(std::string(PIPELAB_BINARY) + " simulate " + dir.file("e.yaml") +
                                          " --costs " + dir.file("c.json"));
  EXPECT_EQ(code, 0) << out;
  // Given costs need not be the model's: simulate says so and replays them (plan refuses).
  EXPECT_NE(out.find("note: --costs " + dir.file("c.json") + ": its stages hold 2097152 bytes"), std::string::npos)
      << out;
  EXPECT_NE(out.find("cuda:0 (simulated devices 0, 1): caching allocator's peak 10.0 MiB, predicted 8.0 MiB with the "
                     "weights, gradients and optimizer state: -20.0%"),
            std::string::npos)
      << out;
}

TEST(Simulate, DerivedCostsByHand) {
  // Two blocks: 1000 FLOPs and 10 outputs per example, then 3000 FLOPs and 5 outputs, 100 and
  // 50 parameters; 1 GFLOP/s, no memory limit, 4 examples, float32.
  std::vector<BlockProfile> blocks(2);
  blocks[0].flops = blocks[0].weight_flops = 1000, blocks[0].output_shape = {10}, blocks[0].parameters = 100;
  blocks[1].flops = blocks[1].weight_flops = 3000, blocks[1].output_shape = {5}, blocks[1].parameters = 50;
  blocks[0].live = {{"x", {10}, 40, true}};
  blocks[1].live = {{"x", {5}, 20, true}};
  sim::DeviceSpec device;
  device.tflops = 1e-3;
  device.optimizer_states = 2;
  const sim::SimCosts c = sim::derive_costs(blocks, sim::estimated_block_memory(blocks), {1, 1}, 4, device);
  ASSERT_EQ(c.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(c.stages[0].seconds[ActionKind::Forward], 4e-6);
  EXPECT_DOUBLE_EQ(c.stages[1].seconds[ActionKind::Backward], 2 * 12e-6);
  EXPECT_DOUBLE_EQ(c.stages[0].activation_bytes, 4 * 10 * 4);
  EXPECT_DOUBLE_EQ(c.stages[1].gradient_bytes, 4 * 10 * 4);
  EXPECT_DOUBLE_EQ(c.stages[1].parameter_bytes, 200);
  EXPECT_DOUBLE_EQ(c.stages[1].optimizer_bytes, 400);
  EXPECT_DOUBLE_EQ(c.stages[0].retained_bytes, 2 * 4 * 10 * 4);  // the estimate: twice the output
  // A cut carrying a mask too: its bytes go forward as profiled, and nothing comes back.
  blocks[0].live.push_back({"mask", {10}, 10, false});
  device.dtype_bytes = 2;
  const sim::SimCosts m = sim::derive_costs(blocks, sim::estimated_block_memory(blocks), {1, 1}, 4, device);
  EXPECT_DOUBLE_EQ(m.stages[0].activation_bytes, 4 * (10 * 2 + 10));
  EXPECT_DOUBLE_EQ(m.stages[1].gradient_bytes, 4 * 10 * 2);
}

TEST(Simulate, BlockMemoryMeasuredByHand) {
  // MLP 8 -> 16 -> 16 -> 4: a hidden block keeps its ReLU's output (16 floats per example;
  // the linear layer's output is freed once the ReLU has run, and its saved input is the
  // previous block's, counted there; the first block's input is the data's); the last, with
  // the last stage's loss, keeps the loss's 4 log-probabilities per example and a few
  // scalars per micro-batch (the loss, the weight total its backward divides by).
  DataSpec data;
  data.input_shape = {8};
  data.classes = 4;
  const ModelDef def = testing::define_model("{type: mlp, sizes: [8, 16, 16, 4]}", data);
  const sim::BlockMemory m = sim::measure_block_memory(def, data, 0);
  EXPECT_TRUE(m.measured);
  ASSERT_EQ(m.retained_per_example.size(), 3u);
  EXPECT_EQ(m.retained_per_example[0], 64);
  EXPECT_EQ(m.retained_per_example[1], 64);
  EXPECT_GE(m.retained_per_example[2], 16);
  EXPECT_LE(m.retained_per_example[2], 16 + 32 / 2);
  // A hidden block's forward has the linear layer's output and the ReLU's alive at once
  // (two 16-float rows per example), and each block's rises are lines in the examples.
  ASSERT_EQ(m.forward_rise.size(), 3u);
  EXPECT_GE(m.forward_rise[1].at(10), 2 * 64 * 10);
  EXPECT_GT(m.backward_rise[1].at(10), 0);
}

TEST(Simulate, UnderAutocastACutSendsWhatTheRunSends) {
  // A language model's residual stream stays float32 under bfloat16 autocast (its embedding
  // adds float32 positions to a Linear's bfloat16 output), so a cut after the embedding sends
  // 4 bytes a feature, not the compute dtype's 2; an MLP's hidden Linear + ReLU sends bfloat16.
  const sim::AutocastSpec bf16{at::kBFloat16, c10::DeviceType::CPU};
  sim::DeviceSpec device;
  device.tflops = 1;
  device.dtype_bytes = 2;
  device.autocast = "BFloat16";
  const DataSpec words = testing::word_windows(50, 8);
  const ModelDef lm = testing::define_model("{type: transformer, head: lm, num_words: 50, d_model: 16, heads: 2, ff: 32, layers: 2}", words);
  const sim::BlockMemory m = sim::measure_block_memory(lm, words, 0, nullptr, 2, true, &bf16);
  ASSERT_EQ(m.cut_per_example.size(), lm.blocks.size() - 1);
  EXPECT_EQ(m.cut_per_example[0], 8 * 16 * 4);
  const std::vector<BlockProfile> blocks = profile_blocks(lm, words, 0, true);
  const std::vector<int> balance{1, static_cast<int>(blocks.size()) - 1};
  const sim::SimCosts c = sim::derive_costs(blocks, m, balance, 3, device);
  EXPECT_EQ(c.stages[0].activation_bytes, 3 * 8 * 16 * 4);
  EXPECT_EQ(c.stages[1].gradient_bytes, 3 * 8 * 16 * 4);
  DataSpec flat;
  flat.input_shape = {8};
  flat.classes = 4;
  const ModelDef mlp = testing::define_model("{type: mlp, sizes: [8, 16, 16, 4]}", flat);
  EXPECT_EQ(sim::measure_block_memory(mlp, flat, 0, nullptr, 2, true, &bf16).cut_per_example[0], 16 * 2);
}

TEST(Simulate, TimedBlocksCostWhatTheyDoHere) {
  // MLP 16 -> 1024 -> 1024 -> 16: the middle block does 64 times the multiply-adds of either
  // other one per example, so at 256 examples it takes several times as long here; the
  // costs of a cut are the timed blocks' sums, the backward split evenly into I and W.
  DataSpec data;
  data.input_shape = {16};
  data.classes = 16;
  const ModelDef def = testing::define_model("{type: mlp, sizes: [16, 1024, 1024, 16]}", data);
  const auto sgd = Registry<OptimizerFactory>::get().create(
      ConfigNode(YAML::Load("{type: sgd, lr: 0.1}"), std::make_shared<ConfigSource>("t"), "optimizer"));
  const sim::BlockTimes t = sim::time_blocks(def, data, 0, *sgd, 8, 256, 1, 3, 2);
  ASSERT_EQ(t.forward.size(), 3u);
  ASSERT_EQ(t.update.size(), 3u);
  // Timed at 8, 25, 81 and 256 examples (geometric), and costed between them.
  EXPECT_EQ(sim::timed_sizes(8, 256), (std::vector<int>{8, 25, 81, 256}));
  EXPECT_EQ(sim::timed_sizes(2, 4), (std::vector<int>{2, 3, 4}));
  for (size_t b = 0; b < 3; ++b) {
    ASSERT_EQ(t.forward[b].examples, (std::vector<double>{8, 25, 81, 256}));
    EXPECT_GE(t.forward[b].at(1), 0);
    EXPECT_GE(t.backward[b].at(300), t.backward[b].at(256));
    EXPECT_GT(t.forward[b].at(256) + t.backward[b].at(256), 0);
  }
  // The model run as a stage runs it, at each timed size: the factors the blocks' times
  // were scaled by (timings: positive, and finite).
  EXPECT_EQ(t.chain_forward.examples, (std::vector<double>{8, 25, 81, 256}));
  EXPECT_EQ(t.chain_backward.examples, (std::vector<double>{8, 25, 81, 256}));
  for (size_t z = 0; z < 4; ++z) {
    EXPECT_GT(t.chain_forward.values[z], 0);
    EXPECT_LT(t.chain_forward.values[z], 1e3);
    EXPECT_GT(t.chain_backward.values[z], 0);
    EXPECT_LT(t.chain_backward.values[z], 1e3);
  }
  // Two device threads busy together run no faster than one alone.
  ASSERT_GE(t.busy_slowdown.size(), 1u);
  EXPECT_GE(t.busy_slowdown_at(64).at(1), 1.0);
  EXPECT_GT(t.forward[1].at(256) + t.backward[1].at(256), 3 * (t.forward[0].at(256) + t.backward[0].at(256)));
  // Summing two members' 4.3 MB of gradients in memory: seconds, not free, and not faster
  // than any memory moves (a generous bound: 10 TB/s).
  EXPECT_GT(t.reduce_gbps, 0);
  EXPECT_LT(t.reduce_gbps, 8e4);
  const std::vector<BlockProfile> blocks(3);
  const sim::SimCosts c = sim::derive_costs(blocks, sim::BlockMemory{{0, 0, 0}, true, {}, {}}, {1, 2}, 64, {}, &t);
  EXPECT_DOUBLE_EQ(c.stages[1].seconds_of(ActionKind::Forward), t.forward[1].at(64) + t.forward[2].at(64));
  // The first stage takes no input gradients: its W is its whole backward. The second's I
  // and W are as timed, together no faster than its whole backward.
  EXPECT_LT(c.stages[0].seconds_of(ActionKind::BackwardInput), 1e-6);
  EXPECT_DOUBLE_EQ(c.stages[0].seconds_of(ActionKind::BackwardWeight), t.backward[0].at(64));
  EXPECT_DOUBLE_EQ(c.stages[1].seconds_of(ActionKind::BackwardInput),
                   t.input_backward[1].at(64) + t.input_backward[2].at(64));
  EXPECT_DOUBLE_EQ(c.stages[1].seconds_of(ActionKind::Backward), t.backward[1].at(64) + t.backward[2].at(64));
  EXPECT_DOUBLE_EQ(c.stages[0].seconds_of(ActionKind::Update), t.update[0]);
}

TEST(Simulate, TraceAndSvg) {
  const sim::SimResult r = sim::simulate(*scheme("{type: zb_h1}"), 2, 4, 1, uniform(2), {});
  const nlohmann::json trace = nlohmann::json::parse(sim::simulated_trace(r));
  int slices = 0;
  for (const auto& e : trace["traceEvents"]) slices += e["ph"] == "X";
  EXPECT_EQ(slices, 2 * (4 * 3 + 1));  // F, I, W per micro-batch and U, per stage
  const std::string svg = sim::render_timeline_svg(r, "zb_h1");
  size_t boxes = 0;
  for (size_t p = svg.find("class=\"action\""); p != std::string::npos; p = svg.find("class=\"action\"", p + 1)) ++boxes;
  EXPECT_EQ(boxes, 26u);
  EXPECT_NE(svg.find("data-action=\"1W3\""), std::string::npos);
  EXPECT_EQ(sim::per_scheme_path("out/t.svg", "a:b=1", true), "out/t-a_b=1.svg");
}

TEST(Simulate, Command) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kTwoStageMlp);
  testing::write_text(dir.file("c.yaml"), "micro_batch_size: 8\nstages:\n  - {forward: 0.001, backward: 0.002}\n"
                                          "  - {forward: 0.001, backward: 0.002}\n");
  const std::string bin = PIPELAB_BINARY;
  auto [code, out] = testing::shell(bin + " simulate --help");
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("usage: pipelab simulate"), std::string::npos) << out;
  // GPipe, 2 stages, 2 micro-batches of 8, checkpointing (its default except_last): each
  // backward runs its forward again, (2 + 1) F + (2 + 1) (B + F) = 3 + 9 = 12 ms.
  std::tie(code, out) = testing::shell(bin + " simulate " + dir.file("e.yaml") + " --costs " + dir.file("c.yaml") +
                                       " --schemes gpipe,pipedream_flush --svg " + dir.file("svg/t.svg"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("| gpipe | 2 | 1 x 2 x 1 | 2 | 2 | 12.00 | 1333 | 33.3% |"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(dir.file("svg/t-pipedream_flush.svg")));
  // 4 micro-batches of 4 examples: the costs halve; without checkpointing, (4 + 1) (F + B) = 7.5 ms.
  std::tie(code, out) = testing::shell(bin + " simulate " + dir.file("e.yaml") + " --costs " + dir.file("c.yaml") +
                                       " --schemes gpipe:checkpoint=never --microbatches 4");
  EXPECT_NE(out.find("| gpipe:checkpoint=never | 2 | 1 x 2 x 1 | 2 | 4 | 7.50 |"), std::string::npos) << out;
  // Derived costs; a scheme that cannot run gets a row saying why, and the exit code is 2.
  std::tie(code, out) = testing::shell(bin + " simulate " + dir.file("e.yaml") +
                                       " --device-flops 1 --schemes gpipe:microbatches=4,gpipe:stages=4");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("activations kept measured with LibTorch's allocator"), std::string::npos) << out;
  EXPECT_NE(out.find("0 optimizer state(s) per parameter"), std::string::npos) << out;  // SGD, no momentum
  EXPECT_NE(out.find("| gpipe:microbatches=4 | 2 | 1 x 2 x 1 | 2 | 4 |"), std::string::npos) << out;
  EXPECT_NE(out.find("| gpipe:stages=4 | not simulated: 4 stages, but the model has 3 blocks"), std::string::npos) << out;
  std::tie(code, out) = testing::shell(bin + " simulate " + dir.file("e.yaml") + " --device-flops 1 --slow-device 1");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("give DEVICE:FACTOR"), std::string::npos) << out;
  std::tie(code, out) = testing::shell(bin + " simulate " + dir.file("e.yaml"));
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("give the costs"), std::string::npos) << out;
  std::tie(code, out) = testing::shell(bin + " simulate " + dir.file("e.yaml") + " --costs " + dir.file("c.yaml") +
                                       " --stages 3");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("have 2 stage entries"), std::string::npos) << out;
}

TEST(Simulate, ASweepsCellByNumber) {
  // The sweep's second run (--dry-run's order): GPipe, 4 micro-batches, whose step the
  // costs give by hand: (4 + 1) (F + B) at a quarter of each = 7.5 ms without checkpointing.
  testing::TempDir dir;
  testing::write_text(dir.file("s.yaml"), std::string(kTwoStageMlp) +
                                              "sweep:\n  grid:\n    scheme:\n      - {type: pipedream_flush, chunks: 2}\n"
                                              "      - {type: gpipe, chunks: 4, checkpoint: never}\n");
  testing::write_text(dir.file("c.yaml"), "micro_batch_size: 8\nstages:\n  - {forward: 0.001, backward: 0.002}\n"
                                          "  - {forward: 0.001, backward: 0.002}\n");
  const std::string simulate = std::string(PIPELAB_BINARY) + " simulate " + dir.file("s.yaml") + " --costs " +
                               dir.file("c.yaml");
  auto [code, out] = testing::shell(simulate + " --cell 2");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("its cell 2 of 2"), std::string::npos) << out;
  EXPECT_NE(out.find("| gpipe | 2 | 1 x 2 x 1 | 2 | 4 | 7.50 |"), std::string::npos) << out;
  std::tie(code, out) = testing::shell(simulate);
  EXPECT_NE(out.find("its first cell"), std::string::npos) << out;
  EXPECT_NE(out.find("| pipedream_flush | 2 | 1 x 2 x 1 | 2 | 2 |"), std::string::npos) << out;
  // Past the sweep, 0, or a file that is not a sweep: exit 2 with the fix.
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {" --cell 3", "has 2 runs. Fix: a number from 1 to 2"},
           {" --cell 0", "--cell 0"},
       }) {
    std::tie(code, out) = testing::shell(simulate + flags);
    EXPECT_EQ(code, 2) << flags << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << flags << "\n" << out;
  }
  testing::write_text(dir.file("e.yaml"), kTwoStageMlp);
  std::tie(code, out) = testing::shell(std::string(PIPELAB_BINARY) + " simulate " + dir.file("e.yaml") + " --costs " +
                                       dir.file("c.yaml") + " --cell 1");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("is not a sweep. Fix: drop --cell"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipelab::simulate_test
