// Multi-process runs end to end: `pipelab launch` starts real processes that meet over
// c10d (Gloo); their results equal a one-process run bit for bit, and a killed rank stops
// the others with an error instead of a hang.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "core/processes/process_group.h"
#include "core/io/pt_file.h"
#include "core/scheme/replicas.h"
#include "tests/support/helpers.h"
#include "tests/support/scheme_cases.h"
#include "tests/tools/launch_support.h"

namespace pipelab::launch_test {
namespace {

using testing::expect_same_run;
using testing::kExperiment;
using testing::pipelab;

/// Runs `yaml` (kExperiment by default) with `sets` in one process ("one") and launched on
/// `nproc` processes ("two"), expects the same run, and returns the launch's output.
std::string expect_launch_equals_run(const testing::TempDir& dir, const std::string& sets, int nproc,
                                     const std::string& yaml = kExperiment) {
  testing::write_text(dir.file("e.yaml"), yaml);
  const auto [c1, out1] = pipelab(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets, dir.file("one")));
  EXPECT_EQ(c1, 0) << out1;
  const auto [c2, out2] =
      pipelab(fmt::format("launch --nproc {} {} {} --set run.output={}", nproc, dir.file("e.yaml"), sets, dir.file("two")));
  EXPECT_EQ(c2, 0) << out2;
  if (c1 == 0 && c2 == 0) expect_same_run(dir.file("one"), dir.file("two"));
  return out2;
}

TEST(Launch, TwoProcessesEqualOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  const std::string out2 = expect_launch_equals_run(dir, "", 2);
  // The writing rank (1, with the loss) prints; rank 0 keeps its own log and no results.
  EXPECT_NE(out2.find("[rank 1] "), std::string::npos) << out2;
  EXPECT_TRUE(std::filesystem::exists(dir.file("two/ranks/rank0/log.txt")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("two/ranks/rank0/summary.json")));
  EXPECT_NE(testing::read_text(dir.file("two/config.yaml")).find("distributed"), std::string::npos);
  // Stages on the CPU: Gloo without a word (auto says why only when a GPU is involved).
  EXPECT_EQ(out2.find("backend auto"), std::string::npos) << out2;
}

TEST(Launch, DataParallelReplicasOverAProcessGroupEqualOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  expect_launch_equals_run(dir, "--set 'scheme={type: dp, replicas: 2}'", 2);
}

TEST(Launch, ProcessesAgreeOnAMeasuredBalance) {
  // `balance: time` times the blocks in every process, and microsecond blocks time
  // differently each time: without an agreement the ranks would cut the model in different
  // places (and stop, their configurations differing). They take process 0's split.
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, out] = pipelab(fmt::format(
      "launch --nproc 4 {} --set 'model.sizes=[12, 24, 24, 24, 24, 24, 24, 4]' --set partition.stages=4 "
      "--set partition.balance=time --set run.epochs=1 --set run.output={}",
      dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  const YAML::Node config = YAML::LoadFile(dir.file("run/config.yaml"));
  int blocks = 0;
  for (const auto& n : config["partition"]["balance"]) blocks += n.as<int>();
  EXPECT_EQ(config["partition"]["balance"].size(), 4u);
  EXPECT_GT(blocks, 0);
}

TEST(Launch, AKilledRankStopsTheOtherWithAClearError) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string common = fmt::format(
      "OMP_NUM_THREADS=1 {} run {} --world-size 2 --master 127.0.0.1:$PORT --set run.epochs=100000 "
      "--set run.output={} --set run.executor.timeout_s=5",
      PIPELAB_BINARY, dir.file("e.yaml"), dir.file("run"));
  const auto start = std::chrono::steady_clock::now();
  const auto [code, out] = testing::shell(fmt::format(
      "PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'); "
      "{0} --rank 0 > {1}/r0.log 2>&1 & p0=$!; {0} --rank 1 > {1}/r1.log 2>&1 & p1=$!; "
      "sleep 4; kill -9 $p0; wait $p1; echo \"rank 1 exit $?\"; cat {1}/r1.log",
      common, dir.path()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A peer's death is not an input mistake: exit 1 (docs/command-line.md, exit codes), and the reason
  // without Gloo's source file names.
  EXPECT_NE(out.find("rank 1 exit 1"), std::string::npos) << out;
  EXPECT_TRUE(out.find("lost rank 0") != std::string::npos || out.find("a peer left") != std::string::npos ||
              out.find("lost contact with the other processes") != std::string::npos)
      << out;
  EXPECT_EQ(out.find(".cc:"), std::string::npos) << out;
  EXPECT_LT(seconds, 40) << out;
}

/// metrics/stages.csv's rows, sorted (processes append theirs once per epoch).
std::vector<std::string> sorted_lines(const std::string& path) {
  std::istringstream in(testing::read_text(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(Launch, NeverFlushedAcrossProcessesEqualsOneProcessWithEveryStagesStaleness) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  // Three stages on three processes: each snapshots and evaluates its own stage's epochs, and
  // the staleness the policies measure in the other processes reaches the writer's record.
  expect_launch_equals_run(dir, "--set 'scheme={type: pipedream, flush: never}' --set partition.stages=3", 3);
  const std::vector<std::string> one = sorted_lines(dir.file("one/metrics/stages.csv"));
  EXPECT_EQ(one, sorted_lines(dir.file("two/metrics/stages.csv")));
  for (const char* stage : {",0,forward_gap,", ",1,forward_gap,", ",2,forward_gap,"}) {
    EXPECT_NE(testing::read_text(dir.file("two/metrics/stages.csv")).find(stage), std::string::npos) << stage;
  }
  EXPECT_NE(testing::read_text(dir.file("two/summary.json")).find("forward_gap"), std::string::npos);
}

// `--set run.executor=distributed` (docs/executors.md's form) keeps the launcher's free port:
// with 29500, c10d's default, taken, the processes still meet (the fifth hardening probe:
// the short form replaced the rendezvous the launcher had set).
TEST(Launch, TheShortExecutorNameKeepsTheLaunchersFreePort) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(29500);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Bound here, or already bound by someone else: either way the port is taken.
  (void)::bind(held, reinterpret_cast<sockaddr*>(&address), sizeof address);
  (void)::listen(held, 1);
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [c1, out1] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("one")));
  EXPECT_EQ(c1, 0) << out1;
  const auto [c2, out2] = pipelab(fmt::format("launch --nproc 2 {} --set run.executor=distributed --set run.output={}",
                                              dir.file("e.yaml"), dir.file("two")));
  EXPECT_EQ(c2, 0) << out2;
  if (c1 == 0 && c2 == 0) expect_same_run(dir.file("one"), dir.file("two"));
  ::close(held);
}

TEST(Launch, MoreProcessesThanDevicesAreRefusedBeforeAnyStarts) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto start = std::chrono::steady_clock::now();
  const auto [code, out] = pipelab(fmt::format("launch --nproc 1000 {} --set run.output={}", dir.file("e.yaml"),
                                               dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--nproc 1000: " + dir.file("e.yaml") + " runs on 2 devices"), std::string::npos) << out;
  EXPECT_NE(out.find("Fix: use --nproc 2 or fewer"), std::string::npos) << out;
  EXPECT_EQ(out.find("[rank"), std::string::npos) << out;  // no rank was started
  EXPECT_FALSE(std::filesystem::exists(dir.file("run")));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
}

TEST(Launch, NcclForStagesOnTheCpuIsAClearError) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, out] = pipelab(fmt::format("launch --nproc 2 {} --set run.output={} --set "
                                               "'run.executor={{type: distributed, backend: nccl}}'",
                                               dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("run.executor.backend: nccl, but "), std::string::npos) << out;
  EXPECT_TRUE(out.find("stage 0 (rank 0) is on the CPU") != std::string::npos ||
              out.find("built without NCCL") != std::string::npos)
      << out;
  EXPECT_NE(out.find("backend: gloo"), std::string::npos) << out;
}

TEST(Launch, AnUnknownBackendNamesTheKeyAndTheChoices) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, out] = pipelab(fmt::format("run {} --set run.output={} --set "
                                               "'run.executor={{type: distributed, backend: mpi}}'",
                                               dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("run.executor.backend"), std::string::npos) << out;
  EXPECT_NE(out.find("'mpi' is not one of auto, gloo, shm, nccl"), std::string::npos) << out;
}

/// The pipelab-* names in /dev/shm at the first moment within a minute when there are none
/// (""), or those still there after it.
std::string shm_names_left() {
  std::string names;
  for (int tries = 0; tries < 1200; ++tries) {
    names.clear();
    for (const auto& f : std::filesystem::directory_iterator("/dev/shm")) {
      const std::string name = f.path().filename().string();
      if (name.rfind("pipelab-", 0) == 0) names += name + " ";
    }
    if (names.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return names;
}

TEST(Launch, EveryHostPathEqualsOneProcess) {
  // Gloo, shared memory, and shared memory whose ring (one page) holds two messages at most,
  // so that GPipe's run of forwards sends the rest over Gloo, told so through the ring.
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  for (const char* executor : {"{type: distributed, backend: gloo}", "{type: distributed, backend: shm}",
                               "{type: distributed, backend: shm, shm_mib: 0.001}"}) {
    testing::TempDir dir;
    testing::write_text(dir.file("e.yaml"), kExperiment);
    const auto [c1, out1] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("one")));
    ASSERT_EQ(c1, 0) << out1;
    const auto [c2, out2] = pipelab(fmt::format("launch --nproc 2 {} --set 'run.executor={}' --set run.output={}",
                                                dir.file("e.yaml"), executor, dir.file("two")));
    ASSERT_EQ(c2, 0) << executor << "\n" << out2;
    expect_same_run(dir.file("one"), dir.file("two"));
    // The segments' names are gone once both ends hold them. Another multi-process test that
    // ctest runs alongside holds names of its own for a while, so a name counts as left behind
    // only if it is still there after a minute of looking for a moment without any.
    EXPECT_EQ(shm_names_left(), "");
  }
}

TEST(Launch, SharedMemoryThatCannotBeHadIsAClearError) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  // Rings far larger than any /dev/shm: refused when the segment is made, not at a SIGBUS.
  const auto [code, out] = pipelab(fmt::format("launch --nproc 2 {} --set run.output={} --set "
                                               "'run.executor={{type: distributed, backend: shm, shm_mib: 1.0e+9}}'",
                                               dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("run.executor.backend: shm, but shared memory cannot join rank"), std::string::npos) << out;
  EXPECT_NE(out.find("cannot commit"), std::string::npos) << out;
  EXPECT_NE(out.find("backend: auto"), std::string::npos) << out;
  // auto takes Gloo there, says so, and trains.
  const auto [code2, out2] = pipelab(fmt::format("launch --nproc 2 {} --set run.output={} --set "
                                                 "'run.executor={{type: distributed, shm_mib: 1.0e+9}}'",
                                                 dir.file("e.yaml"), dir.file("auto")));
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("backend auto uses gloo from rank"), std::string::npos) << out2;
}

// Every registered scheme (the registry decides the cases), one process per stage: the same
// weights and per-step losses as one process. Dropout and batch norm included
// (testing::kEverySchemeMlp).

/// Runs case `c` (with `sets` on top) in one process, then launched with one process per
/// device of each of its `replicas` pipelines, and expects the same run (flush: never too:
/// each process snapshots and evaluates its own stages); a scheme that refuses replicas
/// (auxiliary heads: interlocking, dgl) is refused everywhere.
void expect_launch_equals_one_process(const testing::SchemeCase& c, int replicas, const std::string& sets) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), testing::kEverySchemeMlp);
  const std::string all = fmt::format("--set 'scheme={}' --set partition.stages={} {}", c.scheme, c.stages, sets);
  const auto [c1, out1] = pipelab(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), all, dir.file("one")));
  auto scheme = Registry<Scheme>::get().create(
      ConfigNode(YAML::Load(c.scheme), std::make_shared<ConfigSource>("case"), "scheme"));
  if (!replicas_refused(*scheme, replicas).empty()) {
    EXPECT_EQ(c1, 2) << out1;
    return;
  }
  ASSERT_EQ(c1, 0) << out1;
  // One process per device of the replicated placement (Chimera's two pipelines share theirs).
  const std::vector<int> placement =
      replicated_placement(*scheme, scheme->stages(c.stages), scheme->replicas(replicas));
  const int processes = *std::max_element(placement.begin(), placement.end()) + 1;
  const auto [c2, out2] = pipelab(fmt::format("launch --nproc {} {} {} --set run.output={}", processes,
                                              dir.file("e.yaml"), all, dir.file("many")));
  ASSERT_EQ(c2, 0) << out2;
  expect_same_run(dir.file("one"), dir.file("many"));
}

class MultiProcessEquivalence : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(MultiProcessEquivalence, LaunchEqualsOneProcessBitwise) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  expect_launch_equals_one_process(GetParam(), 1, "");
}

INSTANTIATE_TEST_SUITE_P(Registry, MultiProcessEquivalence, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

// Every registered scheme at 2 stages x 2 replicas, one process per device: each stage's
// replicas all-reduce over a c10d subgroup of their ranks, and the run equals one process
// bit for bit (the same function finishes the gradients in the same order), the
// asynchronous schemes too (each process takes its replica's share of every mini-batch).
class MultiProcessReplicas : public ::testing::TestWithParam<testing::SchemeCase> {};

TEST_P(MultiProcessReplicas, LaunchEqualsOneProcessBitwise) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  const testing::SchemeCase& c = GetParam();
  if (c.stages != 2 || c.scheme.find("type: dp") != std::string::npos) GTEST_SKIP() << "2 stages x 2 replicas only";
  // Micro-batches of at least 2 examples per replica (batch norm's unbiased variance).
  expect_launch_equals_one_process(c, 2, "--set partition.replicas=2 --set run.batch_size=32");
}

INSTANTIATE_TEST_SUITE_P(Registry, MultiProcessReplicas, ::testing::ValuesIn(testing::scheme_cases()),
                         testing::scheme_case_name);

TEST(Launch, AGlobalClipOverStagesInTwoProcessesEqualsOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  // A clip tight enough to act at every step; every stage of the model meets for its norm.
  expect_launch_equals_run(dir, "--set optimizer.clip_grad_norm=0.05", 2);
  const auto [c3, out3] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("free")));
  ASSERT_EQ(c3, 0) << out3;
  EXPECT_FALSE(testing::identical(load_tensor_dict(dir.file("one/checkpoints/final.pt")),
                                  load_tensor_dict(dir.file("free/checkpoints/final.pt"))))
      << "the clip must act, or the equality says nothing about the model-wide collective";
}

// Processes with several devices each: the members of a collective on one rank meet there
// first (core/processes/group_all_reduce.h), then every rank's in the subgroup.
TEST(Launch, CollectivesWithSeveralDevicesPerProcessEqualOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir clip, replicas;
  // 4 stages on 2 processes, every stage in one model-wide clip: two members per rank.
  expect_launch_equals_run(clip, "--set partition.stages=4 --set optimizer.clip_grad_norm=0.05", 2);
  // 2 replicas x 2 stages on 2 processes: rank r holds replica r's whole pipeline.
  expect_launch_equals_run(replicas, "--set partition.replicas=2 --set run.batch_size=32", 2);
  // Interleaved: each process's one device runs two stages of the model-wide clip.
  testing::TempDir interleaved;
  expect_launch_equals_run(interleaved,
                           "--set 'scheme={type: interleaved_1f1b, chunks: 4, virtual_stages: 2}' "
                           "--set partition.stages=4 --set optimizer.clip_grad_norm=0.05",
                           2);
}

// A transformer language model whose output projection is tied to its embedding: the copy
// on rank 1 starts as rank 0's embedding, and their gradients meet in a c10d subgroup.
TEST(Launch, ATiedLanguageModelInTwoProcessesEqualsOneProcess) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir, interleaved;
  torch::manual_seed(1);
  const torch::Tensor x = (torch::randint(20, {48, 1}, torch::kLong) + torch::arange(6, torch::kLong)).remainder(20);
  save_tensor_dict(dir.file("words.pt"), {{"x", x}, {"y", (x + 1).remainder(20)}});
  const std::string yaml = fmt::format(R"(
model:     {{type: transformer, head: lm, tie_embeddings: true, embedding_std: 0.02, num_words: 20, d_model: 8,
             heads: 2, ff: 8, layers: 2, dropout: 0.1}}
dataset:   {{type: tensors, path: {}, test_fraction: 0.25, classes: 20}}
partition: {{stages: 2}}
scheme:    {{type: pipedream_flush, chunks: 2}}
optimizer: {{type: adam, lr: 0.01}}
run:       {{epochs: 2, batch_size: 8, seed: 1, threads: 1, progress: false}}
)",
                                       dir.file("words.pt"));
  expect_launch_equals_run(dir, "", 2, yaml);
  // Interleaved over 4 stages: each process's device runs two stages (rank 0 the embedding
  // and the head), and joins the tie's collective once for both.
  expect_launch_equals_run(interleaved,
                           "--set 'scheme={type: interleaved_1f1b, chunks: 2, virtual_stages: 2}' "
                           "--set partition.stages=4",
                           2, yaml);
  const TensorDict w = load_tensor_dict(dir.file("two/checkpoints/final.pt"));
  at::Tensor embedding, projection;
  for (const auto& [name, t] : w) {
    if (name == "embed.embeddings.weight") embedding = t;
    if (name == "head.output.weight") projection = t;
  }
  ASSERT_TRUE(embedding.defined() && projection.defined());
  EXPECT_TRUE(embedding.equal(projection));
}

}  // namespace
}  // namespace pipelab::launch_test
