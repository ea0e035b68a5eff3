// One vocabulary for where a run's stages sit (core/plan/topology.h): devices, pipelines,
// devices a pipeline, stages a device, read from the compiled plan. Each layout a scheme or
// a partition makes is counted as a Megatron user would count it, and a run, its costs.json,
// `simulate`, `schedule` and `describe` of one file all say the same.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/experiment/plan_request.h"
#include "core/plan/run_plan.h"
#include "core/plan/topology.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::topology_test {
namespace {

const char* const kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 24, 24, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 4, replicas: 2}
scheme:    {type: interleaved_1f1b, virtual_stages: 2, chunks: 4}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 1, batch_size: 16, seed: 1, threads: 1, progress: false, trace: true}
)";

Topology of(const std::vector<std::string>& sets) {
  return topology_of(RunPlan::compile(plan_request(testing::experiment(kMlp, "", sets))));
}

TEST(Topology, EachLayoutIsCountedAsPipelinesDevicesAndStagesADevice) {
  const Topology interleaved = of({});
  EXPECT_EQ(interleaved.json().str(), R"({"devices":4,"pipelines":2,"devices_per_pipeline":2,"stages_per_device":2,"stages":4})");
  EXPECT_EQ(interleaved.text(), "4 devices (2 pipelines of 2 devices, 2 stages a device, 4 stages a pipeline)");
  EXPECT_EQ(interleaved.cell(), "2 x 2 x 2");

  const Topology dp = of({"scheme={type: dp, replicas: 4}", "partition.replicas=1", "partition.stages=1"});
  EXPECT_EQ(dp.cell(), "4 x 1 x 1");
  EXPECT_EQ(dp.devices, 4);

  const Topology v = of({"scheme={type: zbv, chunks: 4}", "partition.replicas=1"});
  EXPECT_EQ(v.text(), "2 devices (1 pipeline of 2 devices, 2 stages a device, 4 stages a pipeline)");

  // Chimera's down and up pipelines each span every device.
  const Topology chimera = of({"scheme={type: chimera, chunks: 4}", "partition.replicas=1"});
  EXPECT_EQ(chimera.text(), "4 devices (2 pipelines over the same 4 devices, 1 stage a device each, 4 stages a pipeline)");
  EXPECT_EQ(chimera.cell(), "2 x 4 x 1 shared");

  const Topology client =
      of({"scheme={type: gpipe, chunks: 4}", "partition.replicas=1", "partition.placement=client_server"});
  EXPECT_EQ(client.text(), "3 devices (1 pipeline of 3 devices, up to 2 stages a device, 4 stages a pipeline)");

  const Topology copies =
      of({"scheme={type: pipedream}", "partition.stages=3", "partition.replicas=[2, 1, 1]"});
  EXPECT_EQ(copies.devices, 4);
  EXPECT_EQ(copies.stage_copies, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(copies.cell(), "copies 2-1-1");
}

TEST(Topology, EveryCommandAndEveryRecordOfOneFileSaysTheSame) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const std::string want = of({}).json().str();
  const std::string words = of({}).text();
  const auto [rc, run] = testing::pipelab(fmt::format("run --quiet {} --set run.output={}", dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(rc, 0) << run;
  const auto summary = nlohmann::json::parse(testing::read_text(dir.file("run/summary.json")));
  EXPECT_EQ(summary["topology"].dump(), nlohmann::json::parse(want).dump());
  EXPECT_EQ(summary["stages"], 4);
  // The model's parameters once; a device holds two of one pipeline's four stages.
  const int64_t model = (12 * 24 + 24) + 7 * (24 * 24 + 24) + (24 * 4 + 4);
  EXPECT_EQ(summary["parameters"].get<int64_t>(), model);
  EXPECT_LT(summary["resident_parameters"].get<int64_t>(), model);
  const auto costs = nlohmann::json::parse(testing::read_text(dir.file("run/metrics/costs.json")));
  EXPECT_EQ(costs["topology"].dump(), nlohmann::json::parse(want).dump());

  const auto [sc, simulated] = testing::pipelab(fmt::format("simulate {} --costs {} --json {}", dir.file("e.yaml"),
                                                            dir.file("run/metrics/costs.json"), dir.file("sim.json")));
  ASSERT_EQ(sc, 0) << simulated;
  const auto sim = nlohmann::json::parse(testing::read_text(dir.file("sim.json")));
  EXPECT_EQ(sim["schemes"][0]["topology"].dump(), nlohmann::json::parse(want).dump());
  EXPECT_NE(simulated.find("| 4 | 2 x 2 x 2 | 4 |"), std::string::npos) << simulated;
  for (const char* command : {"schedule", "describe"}) {
    const auto [code, out] = testing::pipelab(fmt::format("{} {}", command, dir.file("e.yaml")));
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find(words), std::string::npos) << command << "\n" << out;
  }
}

// The replay's known gap for replicated plans run as processes is said where a plan picks one.
TEST(Topology, APlanThatAllReducesAcrossPipelinesSaysWhatItsPeakLeavesOut) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  const auto [code, out] =
      testing::pipelab(fmt::format("plan {} --devices 4 --device-flops 1 --schemes dp", dir.file("e.yaml")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("note: the winner all-reduces over 4 pipelines"), std::string::npos) << out;
}

// Where it runs decides an all-reduce's memory: in processes (`--executor processes`, as
// `pipelab launch` runs it) each member concatenates its gradient, gathers every member's and
// gloo flattens them first: 2 R + 1 gradients on top of the sum, while the ALLREDUCE runs.
TEST(Topology, AnAllReducesMemoryIsWhereItRuns) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kMlp);
  testing::write_text(dir.file("c.yaml"), "micro_batch_size: 8\nstages:\n"
                                          "  - {forward: 0.001, backward: 0.002, update: 0.001, parameter_bytes: 1000}\n");
  const auto peaks = [&](const std::string& executor) {
    const auto [code, out] = testing::pipelab(fmt::format(
        "simulate {} --costs {} --set 'scheme={{type: dp, replicas: 2}}' --set partition.stages=1 --set "
        "partition.replicas=1 --executor {} --json {}",
        dir.file("e.yaml"), dir.file("c.yaml"), executor, dir.file(executor + ".json")));
    EXPECT_EQ(code, 0) << out;
    const auto j = nlohmann::json::parse(testing::read_text(dir.file(executor + ".json")));
    return j["schemes"][0]["peak_activation_bytes"].get<std::vector<double>>();
  };
  // One process: the sum (1000) on the first member's device while the members' ALLREDUCEs
  // run, none on the other's. Processes: each its own sum from the ALLREDUCE to the update,
  // and 2 x 2 + 1 more while the ALLREDUCE runs.
  EXPECT_EQ(peaks("devices"), (std::vector<double>{1000, 0}));
  EXPECT_EQ(peaks("processes"), (std::vector<double>{1000 + 5 * 1000, 1000 + 5 * 1000}));
}

}  // namespace
}  // namespace pipelab::topology_test
