// run.trace: trace.json in the Chrome trace event format (what Perfetto and chrome://tracing
// read: a traceEvents array; "X" slices with name, ph, ts, dur, pid, tid; "M" metadata
// naming the tracks; "s"/"f" flow events paired by id), and metrics/actions.csv, checked
// against the schedule that ran.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "tests/support/helpers.h"

namespace pipelab::trace_test {
namespace {

const char* kMlp = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 4}
partition: {stages: 2, balance: [2, 2]}
scheme:    {type: pipedream_flush, chunks: 4}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 2, batch_size: 16, seed: 1}
)";

nlohmann::json run_and_read(const std::string& out, const std::vector<std::string>& overrides) {
  Experiment e = testing::experiment(kMlp, out, overrides);
  RunnerOptions options;
  options.quiet = true;
  Runner(e, options).run();
  return nlohmann::json::parse(testing::read_text(out + "/trace.json"));
}

TEST(Trace, ChromeTraceOfTheLastEpoch) {
  for (const char* executor : {"run.executor=sequential", "run.executor=threaded"}) {
    testing::TempDir dir;
    const nlohmann::json trace = run_and_read(dir.file("run"), {executor});
    ASSERT_TRUE(trace.contains("traceEvents") && trace["traceEvents"].is_array());
    std::map<std::string, int> slices;  // name -> count
    std::set<int> tracks;
    std::map<int64_t, std::string> flows;  // id -> phases seen
    for (const auto& e : trace["traceEvents"]) {
      for (const char* key : {"name", "ph", "pid"}) ASSERT_TRUE(e.contains(key)) << e.dump();
      const std::string ph = e["ph"];
      if (ph == "X") {
        for (const char* key : {"ts", "dur", "tid"}) ASSERT_TRUE(e.contains(key)) << e.dump();
        EXPECT_GE(e["dur"].get<double>(), 0.0);
        EXPECT_GE(e["ts"].get<double>(), 0.0);
        ++slices[e["name"]];
        tracks.insert(e["tid"].get<int>());
        // A micro-batch is 16 / 4 = 4 examples; stage 0 sends 4 x 24 floats forward, stage 1
        // as many back (the gradient of its input); nothing else leaves a stage.
        const std::string name = e["name"];
        const int64_t sent = name.rfind("0F", 0) == 0 || name.rfind("1B", 0) == 0 ? 4 * 24 * 4 : 0;
        EXPECT_EQ(e["args"]["bytes"].get<int64_t>(), sent) << name;
      } else if (ph == "s" || ph == "f") {
        for (const char* key : {"id", "ts", "tid"}) ASSERT_TRUE(e.contains(key)) << e.dump();
        flows[e["id"].get<int64_t>()] += ph;
      } else {
        EXPECT_EQ(ph, "M") << e.dump();
        EXPECT_TRUE(e["args"].contains("name"));
      }
    }
    // The last epoch only: 64 / 16 = 4 mini-batches of 4 micro-batches, two devices; each
    // mini-batch runs F and B of micro-batches 0..3 and one U per stage.
    EXPECT_EQ(tracks, (std::set<int>{0, 1}));
    for (const char* name : {"0F0", "0F3", "1F0", "1B3", "0B0"}) EXPECT_EQ(slices[name], 4) << executor << " " << name;
    EXPECT_EQ(slices["0U"], 4);
    EXPECT_EQ(slices["1U"], 4);
    EXPECT_EQ(slices.size(), 18u);  // 2 stages x (4 F + 4 B + U)
    // One arrow per activation (stage 0 -> 1) and per gradient (1 -> 0): 2 x 4 x 4, each an
    // "s" then an "f" with the same id.
    EXPECT_EQ(flows.size(), 32u);
    for (const auto& [id, phases] : flows) EXPECT_EQ(phases, "sf") << id;
    // metrics/actions.csv: a line per slice.
    std::istringstream csv(testing::read_text(dir.file("run/metrics/actions.csv")));
    std::string line;
    std::getline(csv, line);
    EXPECT_EQ(line, "device,stage,action,micro_batch,start,end,bytes_sent");
    int lines = 0;
    while (std::getline(csv, line)) {
      ++lines;
      std::istringstream f(line);
      std::string device, stage, action, mb, start, end, bytes;
      std::getline(f, device, ',');
      std::getline(f, stage, ',');
      std::getline(f, action, ',');
      std::getline(f, mb, ',');
      std::getline(f, start, ',');
      std::getline(f, end, ',');
      std::getline(f, bytes, ',');
      EXPECT_EQ(device, stage);
      const bool sends = (stage == "0" && action == "F") || (stage == "1" && action == "B");
      EXPECT_EQ(std::stoll(bytes), sends ? 4 * 24 * 4 : 0) << line;
      EXPECT_LE(std::stod(start), std::stod(end));
    }
    EXPECT_EQ(lines, 2 * 4 * 9);
  }
}

TEST(Trace, OffWritesNothingAndReplicasGetNoArrows) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kMlp, dir.file("off"), {"run.trace=false"});
  RunnerOptions options;
  options.quiet = true;
  Runner(e, options).run();
  EXPECT_FALSE(std::filesystem::exists(dir.file("off/trace.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("off/metrics/actions.csv")));
  const nlohmann::json dp = run_and_read(dir.file("dp"), {"scheme={type: dp, replicas: 2}"});
  for (const auto& ev : dp["traceEvents"]) EXPECT_NE(ev["ph"], "s") << "data-parallel replicas send no activations";
}

}  // namespace
}  // namespace pipelab::trace_test
