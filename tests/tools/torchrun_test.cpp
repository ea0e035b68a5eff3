// Multi-process runs the ecosystem's way: torchrun (the installed torch's, as
// `python3 -m torch.distributed.run`) starts the ranks, which read its environment; --resume
// continues a multi-process run bit for bit, even when its processes saved different
// epochs last; and a worker killed mid-epoch under --max-restarts makes the group restart
// and resume to the uninterrupted run's bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::torchrun_test {
namespace {

using testing::expect_same_run;
using testing::pipelab;

const char* kLonger = R"(
model:     {type: mlp, sizes: [12, 24, 24, 24, 4], dropout: 0.1}
dataset:   {type: synthetic, samples: 256, test_samples: 32, shape: [12], classes: 4}
partition: {stages: 2}
scheme:    {type: pipedream_flush, chunks: 2}
optimizer: {type: adam, lr: 0.01}
run:       {epochs: 3, batch_size: 16, seed: 2, threads: 1, progress: false}
)";

/// `torchrun --no-python --nproc-per-node 2 ... pipelab run FILE ARGS` from the installed torch.
std::string torchrun(const std::string& torchrun_args, const std::string& file, const std::string& args) {
  return fmt::format("OMP_NUM_THREADS=1 python3 -m torch.distributed.run --no-python --nproc-per-node 2 "
                     "--master-addr 127.0.0.1 --master-port {} {} {} run {} {}",
                     dist::free_port(), torchrun_args, PIPELAB_BINARY, file, args);
}

/// Runs kLonger in one process into dir/one; returns the command that launches it on 2
/// processes into dir/two.
std::string run_once_and_launch(const testing::TempDir& dir) {
  testing::write_text(dir.file("e.yaml"), kLonger);
  const auto [code, out] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("one")));
  EXPECT_EQ(code, 0) << out;
  return fmt::format("launch --nproc 2 {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("two"));
}

TEST(MultiProcessResume, AStoppedLaunchResumesBitForBit) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  const std::string launch = run_once_and_launch(dir);
  const auto [c2, out2] = pipelab(launch + " --stop-after 1");
  ASSERT_EQ(c2, 0) << out2;
  // Each process keeps its own stages' state: the writer (rank 1) in the run folder, rank 0 in its own.
  EXPECT_TRUE(std::filesystem::exists(dir.file("two/checkpoints/state.pt")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("two/ranks/rank0/checkpoints/state.pt")));
  const auto [c3, out3] = pipelab(launch + " --resume");
  ASSERT_EQ(c3, 0) << out3;
  expect_same_run(dir.file("one"), dir.file("two"));
}

TEST(MultiProcessResume, ProcessesThatSavedDifferentEpochsResumeFromTheOlder) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  const std::string launch = run_once_and_launch(dir);
  const auto [c2, out2] = pipelab(launch + " --stop-after 2");
  ASSERT_EQ(c2, 0) << out2;
  // As if killed between the two processes' saves of epoch 2: rank 0 holds epoch 1 only.
  const std::string rank0 = dir.file("two/ranks/rank0/checkpoints/");
  std::filesystem::rename(rank0 + "state.prev.pt", rank0 + "state.pt");
  const auto [c3, out3] = pipelab(launch + " --resume");
  ASSERT_EQ(c3, 0) << out3;
  expect_same_run(dir.file("one"), dir.file("two"));
}

TEST(Torchrun, TwoWorkersEqualOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 cannot import torch: no torchrun to test with";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [c1, out1] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("one")));
  ASSERT_EQ(c1, 0) << out1;
  const auto [c2, out2] =
      testing::shell(torchrun("", dir.file("e.yaml"), fmt::format("--quiet --set run.output={}", dir.file("two"))));
  ASSERT_EQ(c2, 0) << out2;
  expect_same_run(dir.file("one"), dir.file("two"));
  // Rank 0 joined as rank 0 (not as a second whole run): its own log, no results.
  EXPECT_TRUE(std::filesystem::exists(dir.file("two/ranks/rank0/log.txt"))) << out2;
  EXPECT_NE(testing::read_text(dir.file("two/config.yaml")).find("world_size: 2"), std::string::npos);
}

// A launcher's environment with an IPv6 master in brackets, as torchrun writes it: the ranks meet
// at [::1] and train the one-process run's bytes.
TEST(Torchrun, AnIpv6MasterInBracketsIsReached) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  if (testing::shell("ip -6 addr show lo 2>/dev/null | grep -q '::1'").first != 0) GTEST_SKIP() << "no IPv6 loopback";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [c1, out1] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("one")));
  ASSERT_EQ(c1, 0) << out1;
  const std::string rank = fmt::format("WORLD_SIZE=2 MASTER_ADDR='[::1]' MASTER_PORT={} OMP_NUM_THREADS=1 {} run {} --quiet "
                                       "--set run.output={}",
                                       dist::free_port(), PIPELAB_BINARY, dir.file("e.yaml"), dir.file("two"));
  const auto [c2, out2] = testing::shell(fmt::format("RANK=1 {0} > {1} 2>&1 & RANK=0 {0}; code=$?; wait $! || code=1; "
                                                     "cat {1}; exit $code",
                                                     rank, dir.file("rank1.log")));
  ASSERT_EQ(c2, 0) << out2;
  expect_same_run(dir.file("one"), dir.file("two"));
}

TEST(Torchrun, AKilledWorkerRestartsTheGroupWhichResumes) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 cannot import torch: no torchrun to test with";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kLonger);
  // Five epochs of 128 steps: the kill (once steps.csv, flushed every second, passes 170
  // lines) lands well before the end however fast the steps go.
  const std::string sets = "--set dataset.samples=2048 --set run.epochs=5";
  const auto [c1, out1] =
      pipelab(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets, dir.file("one")));
  ASSERT_EQ(c1, 0) << out1;
  // Once epoch 2 is under way, SIGKILL the newest worker.
  const std::string run = dir.file("two");
  const auto [c2, out2] = testing::shell(fmt::format(
      "{} & T=$!; while [ $(cat {}/metrics/steps.csv 2>/dev/null | wc -l) -lt 170 ]; do sleep 0.01; done; "
      "pkill -9 -n -f 'run.output={}'; wait $T",
      torchrun("--max-restarts 2", dir.file("e.yaml"), fmt::format("{} --set run.output={}", sets, run)), run, run));
  ASSERT_EQ(c2, 0) << out2;
  EXPECT_NE(out2.find("resuming"), std::string::npos) << "the group was not restarted:\n" << out2;
  expect_same_run(dir.file("one"), run);
}

TEST(Torchrun, AKilledWorkerWithoutRestartsStopsTheGroupNamingIt) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 cannot import torch: no torchrun to test with";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kLonger);
  const std::string run = dir.file("two");
  const auto start = std::chrono::steady_clock::now();
  // A run far longer than the test: once steps are written, SIGKILL the newest worker.
  const auto [code, out] = testing::shell(fmt::format(
      "{} 2>&1 & T=$!; while [ $(cat {}/metrics/steps.csv 2>/dev/null | wc -l) -lt 20 ]; do sleep 0.01; done; "
      "pkill -9 -n -f 'run.output={}'; wait $T",
      torchrun("--max-restarts 0", dir.file("e.yaml"),
               fmt::format("--set run.epochs=1000 --set run.executor.timeout_s=10 --set run.output={}", run)),
      run, run));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(code, 0) << out;
  // torchrun's agent stops the other worker and names the killed one with its signal.
  EXPECT_TRUE(out.find("exitcode") != std::string::npos && out.find("-9") != std::string::npos) << out;
  EXPECT_LT(seconds, 60) << out;
}

TEST(Torchrun, TheAgentKilledEachRankSaysSoInOneLineWithoutStackFrames) {
  // torchrun's agent holds the ranks' store: when it dies, each rank's next exchange breaks.
  // c10d logs that as a warning with a C++ backtrace; the user gets pipelab's line instead.
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  if (!testing::python_torch_available()) GTEST_SKIP() << "python3 cannot import torch: no torchrun to test with";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kLonger);
  const std::string run = dir.file("two");
  const auto [code, out] = testing::shell(fmt::format(
      "{} > {} 2>&1 & T=$!; while [ $(cat {}/metrics/steps.csv 2>/dev/null | wc -l) -lt 20 ]; do sleep 0.01; done; "
      // ^binary: the workers, not this shell (whose command line holds theirs).
      // Up to 3 minutes: a loaded machine (the whole suite on 2 cores) slows the ranks' next
      // exchange with the dead agent's store, where they notice.
      "kill -9 $T; for i in $(seq 1800); do pgrep -f '^{} run .*run.output={}' > /dev/null || break; sleep 0.1; done; "
      "cat {}",
      torchrun("--max-restarts 0", dir.file("e.yaml"),
               fmt::format("--set run.epochs=1000 --set run.executor.timeout_s=10 --set run.output={}", run)),
      dir.file("out.txt"), run, PIPELAB_BINARY, run, dir.file("out.txt")));
  EXPECT_NE(out.find("rank 0 lost contact with the other processes"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 lost contact with the other processes"), std::string::npos) << out;
  EXPECT_NE(out.find("--resume"), std::string::npos) << out;
  EXPECT_EQ(out.find("frame #"), std::string::npos) << out;
}

TEST(Torchrun, AHalfSetEnvironmentIsAClearError) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kExperiment);
  const auto [code, out] = testing::shell(fmt::format("RANK=1 {} run {} --set run.output={}", PIPELAB_BINARY,
                                                      dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("torchrun launch (RANK is set) but WORLD_SIZE is not"), std::string::npos) << out;
  const auto [c2, out2] = testing::shell(fmt::format("SLURM_PROCID=0 SLURM_NTASKS=2 {} run {} --set run.output={}",
                                                     PIPELAB_BINARY, dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(c2, 2) << out2;
  EXPECT_NE(out2.find("SLURM_JOB_NODELIST"), std::string::npos) << out2;
  // One process, whatever launched it, is a plain run.
  const auto [c3, out3] = testing::shell(fmt::format("RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 {} run {} "
                                                     "--quiet --set run.epochs=1 --set run.output={}",
                                                     PIPELAB_BINARY, dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(c3, 0) << out3;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/ranks")));
  // --rank and --world-size override the environment, even one that does not add up.
  const auto [c4, out4] = testing::shell(fmt::format("RANK=5 WORLD_SIZE=2 {} run {} --rank 0 --world-size 1 --quiet "
                                                     "--set run.epochs=1 --set run.output={} --overwrite",
                                                     PIPELAB_BINARY, dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(c4, 0) << out4;
  // A damaged MASTER_ADDR is named as the variable, not as a --set nobody passed.
  const auto [c5, out5] = testing::shell(fmt::format("RANK=0 WORLD_SIZE=2 MASTER_ADDR='no such host' MASTER_PORT=29400 "
                                                     "{} run {} --set run.output={}",
                                                     PIPELAB_BINARY, dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(c5, 2) << out5;
  EXPECT_NE(out5.find("MASTER_ADDR='no such host' is not a host name or address. Fix:"), std::string::npos) << out5;
  EXPECT_EQ(out5.find("--set"), std::string::npos) << out5;
}

}  // namespace
}  // namespace pipelab::torchrun_test
