// The failures a hostile-input probe found (tools/probe/hostile_inputs.py), each now a clear
// error or working: a failed write stops the run and --resume repairs it, one process per
// run folder, stale temporaries go away, damaged resume files and summaries name the file
// and line, ranks with different configurations stop, and YAML's silent cases are errors.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include <yaml-cpp/yaml.h>

#include "core/io/pt_file.h"
#include "core/processes/process_group.h"
#include "core/records/run_record.h"
#include "tests/support/helpers.h"

namespace pipelab::hardening_test {
namespace {

namespace fs = std::filesystem;

std::pair<int, std::string> pipelab(const std::string& args) {
  return testing::shell("OMP_NUM_THREADS=1 " + std::string(PIPELAB_BINARY) + " " + args);
}

const char* kExperiment = R"(
model:     {type: mlp, sizes: [12, 64, 64, 4]}
dataset:   {type: synthetic, samples: 512, test_samples: 64, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 3, batch_size: 16, seed: 1, threads: 1, progress: false}
)";

TEST(Hardening, AFailedWriteStopsTheRunAndResumeRepairsIt) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("straight"))).first, 0);
  // A file-size limit stands in for a full disk: every write past 40 KB fails (EFBIG).
  const auto [code, out] = testing::shell(fmt::format("bash -c \"trap '' XFSZ; ulimit -f 40; OMP_NUM_THREADS=1 {} run {} "
                                                      "--quiet --set run.output={}\"",
                                                      PIPELAB_BINARY, dir.file("e.yaml"), dir.file("full")));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("cannot write"), std::string::npos) << out;
  EXPECT_NE(out.find("--resume"), std::string::npos) << out;
  EXPECT_FALSE(RunRecord::finished(dir.file("full")));
  // With space again, --resume finishes it and the results are those of an uninterrupted run.
  const auto [resumed, rout] = pipelab(fmt::format("run {} --quiet --resume --set run.output={}", dir.file("e.yaml"), dir.file("full")));
  ASSERT_EQ(resumed, 0) << rout;
  EXPECT_TRUE(testing::read_text(dir.file("straight/checkpoints/final.pt")) ==
              testing::read_text(dir.file("full/checkpoints/final.pt")));
  EXPECT_EQ(testing::read_text(dir.file("straight/metrics/steps.csv")), testing::read_text(dir.file("full/metrics/steps.csv")));
}

TEST(Hardening, OneProcessPerRunFolder) {
  testing::TempDir dir;
  RunRecord first(dir.file("run"));
  first.begin(YAML::Load("{a: 1}"), false);
  RunRecord second(dir.file("run"));
  const std::string e = testing::user_error([&] { second.begin(YAML::Load("{a: 1}"), true); });
  EXPECT_NE(e.find("is in use by another pipelab process (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << e;
}

TEST(Hardening, StaleTemporariesAreRemovedAndDamagedResumeFilesNamed) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string run = dir.file("run");
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --stop-after 1 --set run.output={}", dir.file("e.yaml"), run)).first, 0);
  testing::write_text(run + "/checkpoints/state.pt.tmp.4242", "half a checkpoint");
  testing::write_text(run + "/summary.json.tmp.77", "{");
  // Garbage among the finished epoch's step lines: the file and the line, not "stoi".
  const std::string steps = testing::read_text(run + "/metrics/steps.csv");
  testing::write_text(run + "/metrics/steps.csv", steps.substr(0, steps.find('\n') + 1) + "garbage\n" +
                                                   steps.substr(steps.find('\n') + 1));
  auto [code, out] = pipelab(fmt::format("run {} --quiet --resume --set run.output={}", dir.file("e.yaml"), run));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find(run + "/metrics/steps.csv:2: 'garbage' is not a line of this file"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(run + "/checkpoints/state.pt.tmp.4242"));
  EXPECT_FALSE(fs::exists(run + "/summary.json.tmp.77"));
  // A torn last line is where a killed write stopped: cut, and the run resumes.
  testing::write_text(run + "/metrics/steps.csv", steps + "17,2,0.3");
  std::tie(code, out) = pipelab(fmt::format("run {} --quiet --resume --stop-after 1 --set run.output={}", dir.file("e.yaml"), run));
  EXPECT_EQ(code, 0) << out;
  // A broken config.yaml: its file, line and column.
  testing::write_text(run + "/config.yaml", "model: {type: [\n");
  std::tie(code, out) = pipelab(fmt::format("run {} --quiet --resume --set run.output={}", dir.file("e.yaml"), run));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find(run + "/config.yaml:"), std::string::npos) << out;
  EXPECT_NE(out.find("the interrupted run's configuration is damaged"), std::string::npos) << out;
}

TEST(Hardening, AResumedRunKeepsItsMeasuredBalance) {
  // `balance: time` measures again on every start, and microsecond blocks time differently
  // each time (measured: 2 of 6 starts cut these 7 blocks into 4 stages elsewhere). A
  // resumed run must keep the split its weights were trained with (its config.yaml), or it
  // is refused as "a different configuration". Five resumes, each after one epoch.
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string run = dir.file("run");
  const std::string set = "--set 'model.sizes=[12, 24, 24, 24, 24, 24, 24, 4]' --set partition.stages=4 "
                          "--set partition.balance=time --set run.epochs=6 --set run.output=" + run;
  ASSERT_EQ(pipelab(fmt::format("run {} --quiet --stop-after 1 {}", dir.file("e.yaml"), set)).first, 0);
  const std::string first = YAML::Dump(YAML::LoadFile(run + "/config.yaml")["partition"]["balance"]);
  for (int k = 0; k < 5; ++k) {
    const auto [code, out] = pipelab(fmt::format("run {} --quiet --resume --stop-after 1 {}", dir.file("e.yaml"), set));
    ASSERT_EQ(code, 0) << out;
    EXPECT_EQ(YAML::Dump(YAML::LoadFile(run + "/config.yaml")["partition"]["balance"]), first);
  }
  EXPECT_TRUE(RunRecord::finished(run));
}

TEST(Hardening, SweepsValidateSummaries) {
  testing::TempDir dir;
  testing::write_text(dir.file("s.yaml"), std::string(kExperiment) + "sweep:\n  output: " + dir.file("grid") +
                                              "\n  grid: {optimizer.lr: [0.05, 0.1]}\n");
  fs::create_directories(dir.file("grid/lr=0.05"));
  for (const char* bad : {"{}", "{\"status\": \"finished\", \"epochs\": \"three\"}", "[1, 2]"}) {
    testing::write_text(dir.file("grid/lr=0.05/summary.json"), bad);
    const auto [code, out] = pipelab(fmt::format("sweep {} --dry-run", dir.file("s.yaml")));
    EXPECT_EQ(code, 2) << bad << out;
    EXPECT_NE(out.find("grid/lr=0.05/summary.json: not a pipelab summary"), std::string::npos) << bad << out;
  }
}

TEST(Hardening, YamlThatYamlCppAcceptsSilently) {
  const auto error = [](const std::string& yaml) {
    return testing::user_error([&] { Experiment::parse(yaml, "e.yaml"); });
  };
  const std::string twice = std::string(kExperiment) + "optimizer: {type: adam, lr: 0.001}\n";
  EXPECT_NE(error(twice).find("e.yaml:8:1: duplicate key 'optimizer' (first at line 6)"), std::string::npos) << error(twice);
  const std::string merge = "base: &b {type: sgd, lr: 0.1}\n" + std::string(kExperiment).replace(
                                                                       std::string(kExperiment).find("optimizer: {type: sgd, lr: 0.05, momentum: 0.9}"),
                                                                       47, "optimizer: {<<: *b}");
  EXPECT_NE(error(merge).find("YAML merge keys (<<) are not supported"), std::string::npos) << error(merge);
  testing::TempDir dir;
  const auto [code, out] = pipelab("run " + dir.path());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find(dir.path() + ": is a folder, not a regular file"), std::string::npos) << out;
}

TEST(Hardening, InputsThatFailedLateFailBeforeAnythingIsWritten) {
  testing::TempDir dir;
  // Head grammar: the file, the line and the key.
  std::string heads = kExperiment;
  heads.replace(heads.find("scheme:    {type: gpipe, chunks: 2}"), 35, "scheme:    {type: interlocking, heads: fc_conv9}");
  std::string e = testing::user_error([&] { testing::experiment(heads, dir.file("a")); });
  EXPECT_NE(e.find("test.yaml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("scheme.heads: 'fc_conv9' in 'fc_conv9' must end with fc"), std::string::npos) << e;
  // A head that does not fit the stage's output, found when the stages are built.
  e = testing::user_error([&] {
    Experiment x = testing::experiment(kExperiment, dir.file("b"), {"scheme={type: interlocking, heads: conv8_gbpl_fc}"});
    Runner r(x, {false, true});
  });
  EXPECT_NE(e.find("scheme.heads: for stage 0's output [64]: 'conv8' in 'conv8_gbpl_fc' needs image outputs"),
            std::string::npos) << e;
  // A tensors dataset with integer (not int64) inputs, and a model that cannot take int64 ids.
  save_tensor_dict(dir.file("int.pt"), {{"x", at::zeros({8, 12}, at::kInt)}, {"y", at::zeros({8}, at::kLong)}});
  e = testing::user_error([&] {
    Experiment x = testing::experiment(kExperiment, dir.file("c"), {"dataset={type: tensors, path: " + dir.file("int.pt") + "}"});
    Runner r(x, {false, true});
  });
  EXPECT_NE(e.find("x has dtype Int; inputs must be floating point (features) or int64 (token ids)"), std::string::npos) << e;
  save_tensor_dict(dir.file("long.pt"), {{"x", at::zeros({80, 12}, at::kLong)}, {"y", at::arange(80, at::kLong) % 4}});
  e = testing::user_error([&] {
    Experiment x = testing::experiment(kExperiment, dir.file("d"), {"dataset={type: tensors, path: " + dir.file("long.pt") + "}"});
    Runner r(x, {false, true});
  });
  EXPECT_NE(e.find("model mlp cannot take the examples of dataset tensors (shape [12], token ids)"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir.file("d")));
}

TEST(Hardening, RanksWithDifferentConfigurationsStop) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const int port = dist::free_port();
  const auto rank = [&](int r, const std::string& lr) {
    return pipelab(fmt::format("run {} --quiet --rank {} --world-size 2 --master 127.0.0.1:{} --set optimizer.lr={} "
                               "--set run.output={}",
                               dir.file("e.yaml"), r, port, lr, dir.file("run")));
  };
  auto other = std::async(std::launch::async, [&] { return rank(1, "0.2"); });
  const auto [c0, out0] = rank(0, "0.05");
  const auto [c1, out1] = other.get();
  for (const auto& [code, out] : {std::make_pair(c0, out0), std::make_pair(c1, out1)}) {
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("runs another configuration than this one"), std::string::npos) << out;
    EXPECT_NE(out.find("optimizer.lr differ"), std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists(dir.file("run/summary.json")));
}

TEST(Hardening, APortInUseIsOneLine) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const auto [code, out] = pipelab(fmt::format("run {} --quiet --rank 0 --world-size 2 --master 127.0.0.1:{} "
                                               "--set run.output={}",
                                               dir.file("e.yaml"), ntohs(addr.sin_port), dir.file("run")));
  ::close(fd);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("the port is in use"), std::string::npos) << out;
  EXPECT_LE(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

}  // namespace
}  // namespace pipelab::hardening_test
