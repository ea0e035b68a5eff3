// The third hostile-input round (tools/probe/hostile_surfaces.py): one test per class of
// finding on the newer surfaces. Flags and cost files take finite numbers in range; a
// resume after a failure at the end of the last epoch writes what the run promised; damaged
// metrics are refused, never rewritten; tables and plots name every run they leave out; a
// distributed section keeps its options under --rank.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"

namespace pipelab::hardening_surfaces_test {
namespace {

namespace fs = std::filesystem;

std::pair<int, std::string> pipelab(const std::string& args) {
  return testing::shell("OMP_NUM_THREADS=1 " + std::string(PIPELAB_BINARY) + " " + args + " 2>&1");
}

const char* kExperiment = R"(
model:     {type: mlp, sizes: [12, 32, 4]}
dataset:   {type: synthetic, samples: 256, test_samples: 64, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 2, batch_size: 16, seed: 1, threads: 1, progress: false, trace: true}
)";

TEST(HardeningSurfaces, FlagsAndCostFilesTakeFiniteNumbersInRange) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string sim = "simulate " + dir.file("e.yaml") + " ";
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"schedule --scheme gpipe --costs nan,1,1", "--costs nan,1,1"},
           {"schedule --scheme gpipe --costs 1e308,1,1", "--costs 1e308,1,1"},
           {"schedule --scheme gpipe --stages 4 --microbatches 1000000000", "--microbatches 1000000000"},
           {sim + "--device-flops inf", "--device-flops inf"},
           {sim + "--device-flops 10 --link-gbps nan", "--link-gbps nan"},
           {sim + "--device-flops 10 --slow-device abc:2", "--slow-device abc:2"},
           {sim + "--device-flops 10 --slow-device 99:2", "--slow-device 99:2"},
           {sim + "--device-flops 10 --microbatches 1000000", "--microbatches 1000000"},
           {sim + "--device-flops 10 --schemes ,,,", "--schemes ',,,'"}}) {
    const auto [code, out] = pipelab(args);
    EXPECT_EQ(code, 2) << args << "\n" << out;
    EXPECT_NE(out.find(flag), std::string::npos) << args << "\n" << out;
  }
  testing::write_text(dir.file("c.yaml"), "stages: [{forward: .inf}, {forward: 0.01}]\n");
  const auto [code, out] = pipelab(sim + "--costs " + dir.file("c.yaml"));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find(dir.file("c.yaml") + ":1:"), std::string::npos) << out;
  EXPECT_NE(out.find("stages[0].forward"), std::string::npos) << out;
}

TEST(HardeningSurfaces, ResumeAfterAFailedTraceWriteFinishesWhatTheRunPromised) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("straight"))).first, 0);
  // trace.json a folder: the trace write fails after the last epoch trained.
  fs::create_directories(dir.file("broken/trace.json"));
  const auto [code, out] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("broken")));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("trace.json"), std::string::npos) << out;
  EXPECT_NE(out.find("--resume"), std::string::npos) << out;
  fs::remove(dir.file("broken/trace.json"));
  const auto [resumed, rout] =
      pipelab(fmt::format("run {} --resume --quiet --set run.output={}", dir.file("e.yaml"), dir.file("broken")));
  ASSERT_EQ(resumed, 0) << rout;
  for (const char* f : {"trace.json", "metrics/actions.csv", "metrics/costs.json", "summary.json"}) {
    EXPECT_TRUE(fs::is_regular_file(dir.file(std::string("broken/") + f))) << f;
  }
  // The last epoch was trained again from its start: the same weights and steps.
  EXPECT_TRUE(testing::read_text(dir.file("straight/checkpoints/final.pt")) ==
              testing::read_text(dir.file("broken/checkpoints/final.pt")));
  EXPECT_EQ(testing::read_text(dir.file("straight/metrics/steps.csv")), testing::read_text(dir.file("broken/metrics/steps.csv")));
  const YAML::Node summary = YAML::LoadFile(dir.file("broken/summary.json"));
  EXPECT_GT(summary["samples_per_second"].as<double>(), 0);
  EXPECT_FALSE(summary["trace_missing"]) << YAML::Dump(summary);
}

TEST(HardeningSurfaces, AMovedRunResumesAndALostTraceIsExplained) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --stop-after 1 --set run.output={}", dir.file("e.yaml"), dir.file("a")))
                .first,
            0);
  // A run folder copied elsewhere resumes there: run.output is not part of "the same run".
  fs::copy(dir.file("a"), dir.file("b"), fs::copy_options::recursive);
  const auto resume = [&] {
    return pipelab(fmt::format("run {} --quiet --resume --set run.output={}", dir.file("e.yaml"), dir.file("b")));
  };
  auto [code, out] = resume();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(testing::read_text(dir.file("b/config.yaml")).find(dir.file("b")), std::string::npos);
  // Every epoch done, the trace gone: the resumed run finishes and its summary says why the
  // trace is missing, rather than exit 0 in silence.
  for (const char* f : {"summary.json", "trace.json", "metrics/actions.csv", "metrics/costs.json"}) {
    fs::remove(dir.file(std::string("b/") + f));
  }
  std::tie(code, out) = resume();
  ASSERT_EQ(code, 0) << out;
  const YAML::Node summary = YAML::LoadFile(dir.file("b/summary.json"));
  EXPECT_NE(summary["trace_missing"].as<std::string>("").find("--overwrite"), std::string::npos) << YAML::Dump(summary);
  EXPECT_GT(summary["samples_per_second"].as<double>(), 0);
  // A different experiment is still refused, naming the key that differs.
  std::tie(code, out) = pipelab(fmt::format("run {} --quiet --resume --set run.output={} --set optimizer.lr=0.1",
                                            dir.file("e.yaml"), dir.file("a")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("optimizer.lr differs"), std::string::npos) << out;
}

TEST(HardeningSurfaces, OutputFoldersAndAbsurdValuesAreRefusedFirst) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string e = dir.file("e.yaml");
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"simulate " + e + " --device-flops 10 --markdown " + dir.path(), "--markdown " + dir.path() + ": a folder"},
           {"simulate " + e + " --device-flops 10 --input-shape 100000,100000,100000", "--input-shape"},
           {"run " + e + " --set optimizer.lr=1e300", "optimizer.lr: must be a number in (0, 1e+30]"},
           {"run " + e + " --set run.eval_batch_size=2000000000", "run.eval_batch_size"},
           {"run " + e + " --set 'run.output=\"a\tb\"'", "run.output: the folder name holds a control character"},
           {"schedule --scheme interleaved_1f1b --stages 4 --virtual-stages 1000000", "--virtual-stages 1000000"},
           {"schedule --scheme gpipe --set scheme.chunks=2000000000", "(scheme.chunks) 2000000000"},
           {"schedule " + e + " --set 'partition=[2]'", "partition: expected a mapping (options), got a list"},
           {"schedule " + e + " --set partition.stagez=2", "unknown key 'stagez' in 'partition'"},
           {"schedule --scheme zbv --stages 2000 --microbatches 2000 --lowered",
            "--microbatches 2000: give a number from 1 to 500 (at most 1000000 stages x micro-batches)"}}) {
    const auto [code, out] = pipelab(args);
    EXPECT_EQ(code, 2) << args << "\n" << out;
    EXPECT_NE(out.find(expected), std::string::npos) << args << "\n" << out;
  }
}

TEST(HardeningSurfaces, ResumeRefusesDamagedMetricsWithoutRewritingThem) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string run = dir.file("run");
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --stop-after 1 --set run.output={} --set run.epochs=3",
                                dir.file("e.yaml"), run))
                .first,
            0);
  const std::string epochs = run + "/metrics/epochs.csv";
  const std::string good = testing::read_text(epochs);
  const std::string header = good.substr(0, good.find('\n') + 1);
  const auto resume = [&] {
    return pipelab(fmt::format("run {} --quiet --resume --set run.output={} --set run.epochs=3", dir.file("e.yaml"), run));
  };
  for (const auto& [damage, expected] : std::vector<std::pair<std::string, std::string>>{
           {header + "hello,world\n" + good.substr(header.size()), "epochs.csv:2: 'hello,world' is not a line of this file"},
           {good.substr(header.size()), "epochs.csv:1: '1,"},
           {"", "epochs.csv:1: the file is empty"},
           {header, "epochs.csv:2: the file has 0 finished epochs, the training checkpoint 1"}}) {
    testing::write_text(epochs, damage);
    const auto [code, out] = resume();
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find(expected), std::string::npos) << out;
    EXPECT_EQ(testing::read_text(epochs), damage);  // refused, not rewritten
  }
  // What a kill mid-append leaves (a last line cut short) is cut back, and the run goes on.
  testing::write_text(epochs, good + "2,0.5,0.");
  const auto [code, out] = resume();
  EXPECT_EQ(code, 0) << out;
  const std::string after = testing::read_text(epochs);
  EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 4);  // header + 3 epochs
}

TEST(HardeningSurfaces, TablesAndPlotsNameEveryRunTheyLeaveOut) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --set run.output={} --set run.trace=false", dir.file("e.yaml"),
                                dir.file("runs/good")))
                .first,
            0);
  fs::copy(dir.file("runs/good"), dir.file("runs/nan"), fs::copy_options::recursive);
  fs::copy(dir.file("runs/good"), dir.file("runs/empty"), fs::copy_options::recursive);
  fs::copy(dir.file("runs/good"), dir.file("runs/ragged"), fs::copy_options::recursive);
  std::string s = testing::read_text(dir.file("runs/nan/summary.json"));
  const size_t at = s.find("\"final\":");
  s.replace(at, s.find(',', at) - at, "\"final\": NaN");
  testing::write_text(dir.file("runs/nan/summary.json"), s);
  testing::write_text(dir.file("runs/empty/summary.json"), "");
  std::string e = testing::read_text(dir.file("runs/ragged/metrics/epochs.csv"));
  testing::write_text(dir.file("runs/ragged/metrics/epochs.csv"), e.substr(0, e.rfind(',', e.size() - 2)) + "\n");
  ::mkfifo(dir.file("runs/sweep-order.txt").c_str(), 0644);  // never waited on
  const auto [tcode, table] = pipelab(fmt::format("table {} --cols scheme --out {}", dir.file("runs"), dir.file("t")));
  EXPECT_EQ(tcode, 0) << table;
  EXPECT_NE(table.find("warning: skipped empty: "), std::string::npos) << table;
  EXPECT_NE(table.find("nan: its summary.json has no finite number at test_acc.final"), std::string::npos) << table;
  const auto [pcode, plot] = pipelab(fmt::format("plot {} --out {}", dir.file("runs"), dir.file("p.svg")));
  EXPECT_EQ(pcode, 0) << plot;
  EXPECT_NE(plot.find("warning: left out ragged: "), std::string::npos) << plot;
  EXPECT_NE(plot.find("has 14 fields, the header 15"), std::string::npos) << plot;
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"table " + dir.file("runs") + " --rows ,,, --cols scheme", "--rows ',,,'"},
           {"plot " + dir.file("runs") + " --group-by ,", "--group-by ','"}}) {
    const auto [code, out] = pipelab(args);
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find(flag + ": an empty key"), std::string::npos) << out;
  }
}

TEST(HardeningSurfaces, RankKeepsTheFilesDistributedOptions) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), std::string(kExperiment) + "\n");
  const auto [code, out] =
      pipelab(fmt::format("launch --nproc 2 {} --set run.output={} --set 'run.executor={{type: distributed, timeout_s: 7}}' "
                          "--set run.trace=false",
                          dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  const YAML::Node config = YAML::LoadFile(dir.file("run/config.yaml"));
  EXPECT_EQ(config["run"]["executor"]["timeout_s"].as<double>(), 7) << YAML::Dump(config["run"]);
}

}  // namespace
}  // namespace pipelab::hardening_surfaces_test
