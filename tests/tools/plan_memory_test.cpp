// What `pipelab plan` predicts of each device's memory, against what runs measure: the peak
// of the bytes a run's meter sees on a device (activations, each action's temporaries, the
// gradients; costs.json's device_peak_bytes), predicted from blocks measured one at a time
// (tools/simulate/block_memory.h), for plans of one and two devices, replicas,
// recomputation, and split backwards with two stages on a device. Memory is deterministic: unlike step times, it can be held in a test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>

#include <yaml-cpp/yaml.h>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"
#include "tests/tools/plan_support.h"
#include "tools/plan/plan_report.h"

namespace pipelab::plan_memory_test {
namespace {

// Weights and activations of comparable size, so neither hides the other's error.
const char* kMlp = R"(
model:     {type: mlp, sizes: [32, 256, 256, 256, 8]}
dataset:   {type: synthetic, samples: 128, test_samples: 16, shape: [32], classes: 8}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 64, seed: 0, threads: 1, progress: false}
)";

TEST(PlanMemory, PredictsEachDevicesMeasuredPeakWithinTenPercent) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const auto [code, out] = testing::pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --allow-idle --top 200 "
                                                        "--json {}",
                                                        dir.file("e.yaml"), dir.file("ranked.json")));
  ASSERT_EQ(code, 0) << out;
  const auto ranked = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")))["ranked"];
  // One candidate per scheme type and shape: one device, data parallelism, pipelines with
  // and without recomputation, a V.
  std::set<std::string> seen;
  int checked = 0;
  for (const auto& c : ranked) {
    const std::string label = c["label"].get<std::string>();
    const std::string key = label.substr(0, label.find(' ')) + std::to_string(c["stages"].get<int>()) + "x" +
                            std::to_string(c["replicas"].get<int>()) + (label.find("always") != std::string::npos ? "r" : "");
    if (!seen.insert(key).second) continue;
    const std::string run = dir.file("run" + std::to_string(checked));
    const auto [rc, log] = testing::pipelab(fmt::format("run --quiet {} --set run.trace=true --set run.output={} {}",
                                                        dir.file("e.yaml"), run, testing::plan_candidate_flags(c)));
    ASSERT_EQ(rc, 0) << label << "\n" << log;
    const auto costs = nlohmann::json::parse(testing::read_text(run + "/metrics/costs.json"));
    double measured = 0;
    for (const auto& s : costs["stages"]) measured = std::max(measured, s["device_peak_bytes"].get<double>());
    double predicted = 0;
    for (const auto& p : c["peak_above_weights_bytes"]) predicted = std::max(predicted, p.get<double>());
    EXPECT_NEAR(predicted, measured, 0.1 * measured) << label << ", " << c["stages"] << " stages x " << c["replicas"];
    if (++checked == 8) break;
  }
  EXPECT_EQ(checked, 8);
}

// A small ResNet, whose activations outweigh its weights: what a split backward keeps
// between its I and its W (the gradients at each convolution's output) is as large as the
// activations, and V-shaped and interleaved plans hold two stages on a device.
const char* kCnn = R"(
model:     {type: resnet, architecture: "8,1/16,1", stem: cifar}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [3, 16, 16], classes: 10}
scheme:    {type: gpipe, chunks: 4}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 32, seed: 0, threads: 1, progress: false}
)";

TEST(PlanMemory, SplitBackwardsOnTwoStagesPerDeviceArePredictedWithinTenPercent) {
  // oneDNN's AVX-512 convolutions block channels by 16, so this model's 8-channel blocks
  // measure larger temporaries one at a time than the run's peak holds (an H200 host,
  // 2026-11-27: 734,032 bytes predicted, 627,616 measured; capped at AVX2, as on the CPU
  // machine, 659,408: docs/planner.md, "Memory"). The plan and its runs use AVX2 kernels.
  ::setenv("DNNL_MAX_CPU_ISA", "AVX2", /*overwrite=*/0);
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kCnn);
  const auto [code, out] = testing::pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --schemes zb_h1,v_half "
                                                        "--top 300 --json {}",
                                                        dir.file("e.yaml"), dir.file("ranked.json")));
  ASSERT_EQ(code, 0) << out;
  const auto ranked = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")))["ranked"];
  int checked = 0;
  for (const auto& c : ranked) {
    const std::string label = c["label"].get<std::string>();
    if (label != "zb_h1 virtual_stages=2 chunks=4" && label != "v_half chunks=4") continue;
    if (c["stages"].get<int>() != 4 || c["replicas"].get<int>() != 1) continue;
    const std::string run = dir.file("run" + std::to_string(checked++));
    const auto [rc, log] = testing::pipelab(fmt::format("run --quiet {} --set run.output={} {}", dir.file("e.yaml"), run,
                                                        testing::plan_candidate_flags(c)));
    ASSERT_EQ(rc, 0) << label << "\n" << log;
    const auto costs = nlohmann::json::parse(testing::read_text(run + "/metrics/costs.json"));
    std::vector<double> measured(2, 0);
    for (const auto& s : costs["stages"]) {
      measured.at(s["device"].get<size_t>()) = s["device_peak_bytes"].get<double>();
      // The first stage's I makes no input gradient and keeps nothing; the middle ones keep
      // their gradients for W.
      const int stage = s["stage"].get<int>();
      if (stage == 0) EXPECT_EQ(s["backward_input_kept_bytes"].get<double>(), 0) << label;
      if (stage == 1 || stage == 2) EXPECT_GT(s["backward_input_kept_bytes"].get<double>(), 0) << label;
    }
    for (size_t d = 0; d < 2; ++d) {
      EXPECT_NEAR(c["peak_above_weights_bytes"][d].get<double>(), measured[d], 0.1 * measured[d]) << label << ", device " << d;
    }
  }
  EXPECT_EQ(checked, 2);
}

// A cap that the first two devices exceed: the planner recomputes the stages of the fullest
// device, earliest first, until the pipeline fits, and spares the others; the run of that
// plan holds on each device what the plan said.
TEST(PlanMemory, UnderATightCapTheFullestStagesRecomputeAndTheRunFits) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kDeepMlp);
  const std::string plan = fmt::format("plan {} --devices 4 --device-flops 1 --schemes pipedream_flush --top 300 "
                                       "--json {} ",
                                       dir.file("e.yaml"), dir.file("ranked.json"));
  // The four-stage pipeline of 8 micro-batches, and then its twin under the cap.
  const auto pipeline = [&](const std::string& flags, const std::string& label) {
    const auto [rc, out] = testing::pipelab(plan + flags);
    EXPECT_EQ(rc, 0) << out;
    const auto ranked = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")));
    for (const auto& c : ranked["ranked"]) {
      if (c["stages"] == 4 && c["replicas"] == 1 && c["label"] == label) return c;
    }
    ADD_FAILURE() << "no four-stage pipeline " << label << " in\n" << out;
    return nlohmann::json();
  };
  const auto free = pipeline("", "pipedream_flush chunks=8");
  ASSERT_FALSE(free.is_null());
  ASSERT_TRUE(free["recompute"].empty());
  std::vector<double> peaks = free["peak_bytes"].get<std::vector<double>>();
  ASSERT_EQ(peaks.size(), 4u);
  // Devices 0 and 1 hold the most (four and three micro-batches in flight, or their sends).
  ASSERT_GT(std::min(peaks[0], peaks[1]), std::max(peaks[2], peaks[3]));
  const double cap = (std::min(peaks[0], peaks[1]) + std::max(peaks[2], peaks[3])) / 2;
  const auto fit = pipeline(fmt::format("--memory-cap {} --emit {}", cap / (1 << 30), dir.file("best.yaml")),
                            "pipedream_flush chunks=8 recompute=[0,1]");
  ASSERT_FALSE(fit.is_null());
  EXPECT_EQ(fit["recompute"], nlohmann::json::array({0, 1}));
  // The emitted winner carries its own recomputed stages (none when it recomputes nothing).
  const auto winner = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")))["ranked"][0];
  const YAML::Node emitted = YAML::LoadFile(dir.file("best.yaml"))["partition"]["recompute"];
  EXPECT_EQ(emitted ? emitted.as<std::vector<int>>() : std::vector<int>{}, winner["recompute"].get<std::vector<int>>());
  for (const auto& p : fit["peak_bytes"]) EXPECT_LE(p.get<double>(), cap);
  EXPECT_GT(fit["step_seconds"].get<double>(), free["step_seconds"].get<double>());
  // The run of it recomputes stages 0 and 1, and their devices hold what the plan said. (In
  // one order of actions: with these 32 KiB messages, whether a thread frees a gradient just
  // before or just after another's peak moves a device's peak by 15%; the sequential
  // executor runs the schedule's order every time.)
  const auto [rc, log] = testing::pipelab(fmt::format("run --quiet {} --set run.output={} --set run.executor=sequential {}",
                                                      dir.file("e.yaml"), dir.file("run"), testing::plan_candidate_flags(fit)));
  ASSERT_EQ(rc, 0) << log;
  const auto costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  for (const auto& s : costs["stages"]) {
    const size_t device = s["device"].get<size_t>();
    const double measured = s["device_peak_bytes"].get<double>();
    if (device < 2) EXPECT_NEAR(fit["peak_above_weights_bytes"][device].get<double>(), measured, 0.1 * measured) << device;
  }
}

// Offload is the second lever (tools/plan/offload_fit.h), tried where the host link is
// known: over a fast link its copies hide behind compute and it beats recomputing a
// forward in every backward; over a slow one the backwards wait for their reloads and
// recomputation wins. Either way the plan fits, and the emitted file says which.
TEST(PlanMemory, UnderATightCapOffloadWinsOverAFastHostLinkAndRecomputationOverASlowOne) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kDeepMlp);
  const std::string plan = fmt::format("plan {} --devices 4 --device-flops 1 --schemes pipedream_flush --top 300 "
                                       "--json {} ",
                                       dir.file("e.yaml"), dir.file("ranked.json"));
  const auto pipeline = [&](const std::string& flags) {
    const auto [rc, out] = testing::pipelab(plan + flags);
    EXPECT_EQ(rc, 0) << out;
    const auto ranked = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")));
    for (const auto& c : ranked["ranked"]) {
      const std::string label = c["label"].get<std::string>();
      if (c["stages"] == 4 && c["replicas"] == 1 && label.rfind("pipedream_flush chunks=8", 0) == 0) return c;
    }
    ADD_FAILURE() << "no four-stage pipeline of 8 micro-batches in\n" << out;
    return nlohmann::json();
  };
  const auto free = pipeline("");
  ASSERT_FALSE(free.is_null());
  const std::vector<double> peaks = free["peak_bytes"].get<std::vector<double>>();
  ASSERT_EQ(peaks.size(), 4u);
  const double cap = (std::min(peaks[0], peaks[1]) + std::max(peaks[2], peaks[3])) / 2;
  const std::string capped = fmt::format("--memory-cap {} ", cap / (1 << 30));
  const auto fast = pipeline(capped + "--host-gbps 1e6 --emit " + dir.file("fast.yaml"));
  const auto winner = nlohmann::json::parse(testing::read_text(dir.file("ranked.json")))["ranked"][0];
  const auto slow = pipeline(capped + "--host-gbps 1e-3");
  ASSERT_FALSE(fast.is_null());
  ASSERT_FALSE(slow.is_null());
  EXPECT_FALSE(fast["offload"].empty()) << fast.dump();
  EXPECT_TRUE(fast["recompute"].empty()) << fast.dump();
  EXPECT_TRUE(slow["offload"].empty()) << slow.dump();
  EXPECT_FALSE(slow["recompute"].empty()) << slow.dump();
  for (const auto* c : {&fast, &slow}) {
    for (const auto& p : (*c)["peak_bytes"]) EXPECT_LE(p.get<double>(), cap);
  }
  EXPECT_LT(fast["step_seconds"].get<double>(), slow["step_seconds"].get<double>());
  // The emitted winner carries its offload (none when it offloads nothing).
  if (!winner["offload"].empty()) {
    const YAML::Node emitted = YAML::LoadFile(dir.file("fast.yaml"))["partition"]["offload"];
    ASSERT_TRUE(emitted) << testing::read_text(dir.file("fast.yaml"));
    EXPECT_EQ(emitted["stages"].as<std::vector<int>>(), winner["offload"].get<std::vector<int>>());
  }
}

TEST(PlanMemory, TheEmittedFileRecomputesTheStagesThePlanChose) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kDeepMlp);
  plan::Candidate c;
  c.section = std::make_shared<const YAML::Node>(YAML::Load("{type: pipedream_flush, chunks: 8}"));
  c.stages = 4;
  c.balance = {2, 2, 2, 2};
  c.recompute = {0, 1};
  const YAML::Node emitted =
      plan::emitted_experiment(YAML::LoadFile(dir.file("e.yaml")), dir.file("e.yaml"), c, dir.path());
  EXPECT_EQ(emitted["partition"]["recompute"].as<std::vector<int>>(), (std::vector<int>{0, 1}));
  // ... and a run of it reads them back.
  const Experiment e = testing::experiment(YAML::Dump(emitted));
  EXPECT_EQ(e.partition.recompute, (Recompute{Recompute::Kind::Stages, {0, 1}}));
}

}  // namespace
}  // namespace pipelab::plan_memory_test
