// Codecs with state in whole runs: AQ-SGD's warm-up epoch is plain training bit for bit, its
// per-example history gives the same bits under every executor (the middle process of a
// never-flushed launch included, which reads no inputs and still knows each micro-batch's
// examples), and the history and top-k's error feedback survive --resume exactly, in one
// process and across processes, for every replica of the pipeline.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/processes/process_group.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::aq_sgd_run_test {
namespace {

using testing::expect_same_run;
using testing::kExperiment;
using testing::pipelab;

const char* kAqSgd = "--set 'compression={activations: {type: aq_sgd, bits: 4}, gradients: {type: fixpoint, bits: 8}}'";

/// Runs `pipelab ARGS` and expects exit 0.
void ok(const std::string& args) {
  const auto [code, text] = pipelab(args);
  EXPECT_EQ(code, 0) << args << "\n" << text;
}

TEST(AqSgdRun, TheWarmUpEpochIsPlainTraining) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string one = "--set run.epochs=1 --set run.output=";
  ok(fmt::format("run --quiet {} --set 'compression={{activations: {{type: aq_sgd}}}}' {}{}", dir.file("e.yaml"), one,
                 dir.file("aq")));
  ok(fmt::format("run --quiet {} {}{}", dir.file("e.yaml"), one, dir.file("plain")));
  expect_same_run(dir.file("aq"), dir.file("plain"));
  // The summary reports the history both ends keep: 128 examples x 24 fp16 + visits, twice.
  const std::string summary = testing::read_text(dir.file("aq/summary.json"));
  EXPECT_NE(summary.find("\"codec_storage_bytes\": " + std::to_string(2 * (128 * 24 * 2 + 128 * 4))), std::string::npos)
      << summary;
}

TEST(AqSgdRun, EveryExecutorGivesTheSameBits) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string three = "--set run.epochs=3";
  ok(fmt::format("run --quiet {} {} {} --set run.output={}", dir.file("e.yaml"), kAqSgd, three, dir.file("seq")));
  ok(fmt::format("run --quiet {} {} {} --set run.executor=threaded --set run.output={}", dir.file("e.yaml"), kAqSgd,
                 three, dir.file("thr")));
  expect_same_run(dir.file("seq"), dir.file("thr"));
  // It compresses after the warm-up: not the plain run's numbers.
  ok(fmt::format("run --quiet {} {} --set run.output={}", dir.file("e.yaml"), three, dir.file("plain")));
  EXPECT_NE(testing::read_text(dir.file("plain/metrics/steps.csv")), testing::read_text(dir.file("seq/metrics/steps.csv")));
  if (!dist::available()) GTEST_SKIP() << "no process groups here";
  ok(fmt::format("launch --nproc 2 {} {} {} --set run.output={}", dir.file("e.yaml"), kAqSgd, three, dir.file("proc")));
  expect_same_run(dir.file("seq"), dir.file("proc"));
  // A never-flushed asynchronous pipeline of 3 stages on 3 processes: the middle one reads
  // no inputs, yet sends and receives the examples' histories.
  const std::string async =
      "--set 'model.sizes=[12, 24, 24, 24, 4]' --set partition.stages=3 --set 'scheme={type: pipedream, flush: never}'";
  ok(fmt::format("run --quiet {} {} {} {} --set run.output={}", dir.file("e.yaml"), kAqSgd, three, async,
                 dir.file("async_seq")));
  ok(fmt::format("launch --nproc 3 {} {} {} {} --set run.output={}", dir.file("e.yaml"), kAqSgd, three, async,
                 dir.file("async_proc")));
  expect_same_run(dir.file("async_seq"), dir.file("async_proc"));
}

TEST(AqSgdRun, StateSurvivesResumeExactly) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string topk = "--set 'compression={activations: {type: topk, fraction: 0.3, error_feedback: ef}, "
                           "gradients: {type: topk, fraction: 0.5, error_feedback: ef21}}'";
  for (const std::string& codec : {std::string(kAqSgd), topk}) {
    const std::string base = fmt::format("{} {} --set run.epochs=3", dir.file("e.yaml"), codec);
    ok(fmt::format("run --quiet {} --set run.output={} --overwrite", base, dir.file("whole")));
    ok(fmt::format("run --quiet {} --set run.output={} --overwrite --stop-after 2", base, dir.file("cut")));
    ok(fmt::format("run --quiet {} --set run.output={} --resume", base, dir.file("cut")));
    expect_same_run(dir.file("whole"), dir.file("cut"));
    EXPECT_EQ(testing::read_text(dir.file("whole/metrics/steps.csv")), testing::read_text(dir.file("cut/metrics/steps.csv")))
        << codec;
    if (!dist::available()) continue;
    // Across processes each rank restores the ends of its own stages.
    ok(fmt::format("launch --nproc 2 {} --set run.output={} --overwrite --stop-after 1", base, dir.file("pcut")));
    ok(fmt::format("launch --nproc 2 {} --set run.output={} --resume", base, dir.file("pcut")));
    expect_same_run(dir.file("whole"), dir.file("pcut"));
  }
}

TEST(AqSgdRun, EveryReplicasStreamEndsSurviveResume) {
  // Each replica's stages hold stream ends of their own (ids, not pipeline positions, name
  // them): a resume restores every one, whatever the layout, in one process and in several.
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::vector<std::string> codecs{
      "--set 'compression={activations: {type: topk, fraction: 0.3, error_feedback: ef}, "
      "gradients: {type: topk, fraction: 0.5, error_feedback: ef21}}'",
      "--set 'compression={activations: {type: aq_sgd, bits: 4}, "
      "gradients: {type: topk, fraction: 0.5, error_feedback: ef}}'"};
  const std::vector<std::string> layouts{"--set partition.replicas=2",
                                         "--set 'partition.replicas=[2, 1]' --set 'scheme={type: pipedream}'",
                                         "--set partition.replicas=3 --set 'scheme={type: async}'"};
  for (const std::string& codec : codecs) {
    for (const std::string& layout : layouts) {
      const std::string base = fmt::format("{} {} {} --set run.epochs=3", dir.file("e.yaml"), codec, layout);
      ok(fmt::format("run --quiet {} --set run.output={} --overwrite", base, dir.file("whole")));
      ok(fmt::format("run --quiet {} --set run.output={} --overwrite --stop-after 2", base, dir.file("cut")));
      ok(fmt::format("run --quiet {} --set run.output={} --resume", base, dir.file("cut")));
      SCOPED_TRACE(codec + " " + layout);
      expect_same_run(dir.file("whole"), dir.file("cut"));
      if (layout != layouts.front() || !dist::available()) continue;
      ok(fmt::format("launch --nproc 2 {} --set run.output={} --overwrite --stop-after 1", base, dir.file("pcut")));
      ok(fmt::format("launch --nproc 2 {} --set run.output={} --resume", base, dir.file("pcut")));
      expect_same_run(dir.file("whole"), dir.file("pcut"));
    }
  }
}

TEST(AqSgdRun, ADiskHistoryGivesTheMemoryOnesBits) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string disk = "--set 'compression={activations: {type: aq_sgd, bits: 4, storage: disk}}'";
  const std::string memory = "--set 'compression={activations: {type: aq_sgd, bits: 4}}'";
  ok(fmt::format("run --quiet {} {} --set run.epochs=3 --set run.output={}", dir.file("e.yaml"), disk, dir.file("disk")));
  ok(fmt::format("run --quiet {} {} --set run.epochs=3 --set run.output={}", dir.file("e.yaml"), memory,
                 dir.file("memory")));
  expect_same_run(dir.file("disk"), dir.file("memory"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("disk/codec_cache/0-1.F.t0.send.bin")));
}

TEST(AqSgdRun, ADiskHistoryThatDoesNotFitIsAnErrorNamingTheFile) {
  // The history's blocks are reserved when it is made: with too little room (here a file
  // size limit, whose signal the shell ignores, as a full disk would refuse) the run stops
  // with the file's name, where writing into a sparse mapping would have died of SIGBUS.
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string disk = "--set 'compression={activations: {type: aq_sgd, bits: 4, storage: disk, cache: full}}' "
                           "--set 'model.sizes=[12, 1024, 4]'";
  const auto [code, out] = testing::shell(fmt::format("trap '' XFSZ; ulimit -f 256; OMP_NUM_THREADS=1 {} run --quiet {} {} "
                                                      "--set run.output={}",
                                                      PIPELAB_BINARY, dir.file("e.yaml"), disk, dir.file("full")));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("AQ-SGD's history (compression: {storage: disk}) cannot be made: "), std::string::npos) << out;
  EXPECT_NE(out.find("full/codec_cache/0-1.F.t0.send.bin: the file would pass the largest size"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Fix: raise the limit"), std::string::npos) << out;
  // A folder that cannot be made (run.output/codec_cache under a file) names it too.
  testing::write_text(dir.file("file"), "x");
  const auto [code2, out2] = pipelab(fmt::format("run --quiet {} {} --set run.output={}", dir.file("e.yaml"), disk,
                                                 dir.file("file/run")));
  EXPECT_NE(code2, 0);
  EXPECT_EQ(out2.find("filesystem error"), std::string::npos) << out2;
}

}  // namespace
}  // namespace pipelab::aq_sgd_run_test
