// The sixth hostile-input round (offload, Hugging Face files, clocks, flags, check): one test
// per class of finding the command line shows. A resumed run keeps one clock; a flag that
// would be ignored, or whose examples a model cannot take, is refused naming the flag; what
// --tokens cannot mean is said; a planned sweep cell emits a file `run` takes. (Offload's
// refusals: offload_refusals_test.cpp; tied checkpoints: llama_checkpoint_test.cpp; the
// miniatures: miniature_test.cpp; check: check_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::hardening_sixth_test {
namespace {

using testing::pipelab;

const char* kExperiment = R"(
model:     {type: mlp, sizes: [12, 32, 32, 3]}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [12], classes: 3}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 2, batch_size: 16, seed: 1, threads: 1, progress: false}
)";

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(HardeningSixth, AResumedRunKeepsTheClockItStartedWith) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string run = fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("run"));
  auto [code, out] = pipelab(run + " --cluster h100_sxm --stop-after 1");
  ASSERT_EQ(code, 0) << out;
  std::tie(code, out) = pipelab(run + " --resume --cluster p40");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--resume: the run's first 1 epoch was timed on h100_sxm");
  EXPECT_HAS(out, "one run keeps one clock");
  // Without cost flags the run goes on with its own clock: one step a step, throughout.
  std::tie(code, out) = pipelab(run + " --resume");
  ASSERT_EQ(code, 0) << out;
  const std::string steps = testing::read_text(dir.file("run/metrics/steps.csv"));
  std::vector<double> times;
  std::istringstream lines(steps);
  std::string line;
  std::getline(lines, line);
  const size_t column = std::count(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(line.find("simulated_time")), ',');
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::string cell;
    for (size_t c = 0; c <= column; ++c) std::getline(cells, cell, ',');
    times.push_back(std::stod(cell));
  }
  ASSERT_EQ(times.size(), 8u) << steps;
  for (size_t i = 1; i < times.size(); ++i) EXPECT_NEAR(times[i] - times[i - 1], times[0], 1e-9 * times[0]) << steps;
  // A run that was not timed is not timed from the middle.
  testing::write_text(dir.file("f.yaml"), kExperiment);
  const std::string untimed = fmt::format("run {} --quiet --set run.output={}", dir.file("f.yaml"), dir.file("untimed"));
  std::tie(code, out) = pipelab(untimed + " --stop-after 1");
  ASSERT_EQ(code, 0) << out;
  std::tie(code, out) = pipelab(untimed + " --resume --cluster h100_sxm");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "the run's first 1 epoch was not timed on a simulated cluster");
}

TEST(HardeningSixth, ExampleAndCostFlagsThatWouldBeIgnoredAreRefused) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string run = fmt::format("run {} --quiet --set run.output={} ", dir.file("e.yaml"), dir.file("run"));
  auto [code, out] = pipelab(run + "--input-shape 8");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--input-shape describes the simulated devices of a clock, but no flag asks for one");
  std::tie(code, out) = pipelab(run + "--link-gbps 100");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--link-gbps describes the simulated devices");
  std::tie(code, out) = pipelab(run + "--cluster h100_sxm --classes 3");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--classes describes the examples of --input-shape, which is not given");
  std::tie(code, out) = pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --target ''", dir.file("e.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--target : not METRIC=VALUE");
  std::tie(code, out) = pipelab(fmt::format("simulate {} --device-flops 1 --tokens ''", dir.file("e.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--tokens '': no lengths");
  EXPECT_FALSE(std::filesystem::exists(dir.file("run")));
}

TEST(HardeningSixth, ExamplesAModelCannotTakeAreTheFlagsMistake) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  auto [code, out] = pipelab(fmt::format("run {} --quiet --set run.output={} --cluster h100_sxm --input-shape 8",
                                         dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--input-shape 8, --classes 10 (its default): the model does not read such examples");
  std::tie(code, out) = pipelab(fmt::format("describe {} --input-shape 12 --classes 3 --token-ids", dir.file("e.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--input-shape 12, --classes 3, --token-ids: the model does not read such examples: LibTorch says");
  testing::write_text(dir.file("lm.yaml"), R"(
model:     {type: llama, vocab: 64, hidden: 16, intermediate: 32, layers: 2, heads: 2, kv_heads: 1}
dataset:   {type: synthetic, samples: 32, test_samples: 8, tokens: {vocabulary: 64, length: 16}}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: adamw, lr: 0.001}
run:       {epochs: 1, batch_size: 8}
)");
  std::tie(code, out) = pipelab(fmt::format("describe {} --input-shape 16 --classes 64 --token-ids", dir.file("lm.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--input-shape 16, --classes 64, --token-ids: the model does not read such examples");
  // --tokens longer than the data, or where there are no sequences.
  std::tie(code, out) = pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --tokens 17", dir.file("lm.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--tokens 17: longer than the data's 16 tokens a sequence");
  std::tie(code, out) = pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --tokens 4", dir.file("e.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--tokens 4: model mlp's examples are not token sequences");
}

// A ragged run's costs are the means over its micro-batches of differing lengths: --tokens would
// scale them a second time.
TEST(HardeningSixth, ARaggedRunsCostsAreNotScaledByTokensAgain) {
  testing::TempDir dir;
  testing::write_text(dir.file("r.yaml"), R"(
model:     {type: llama, vocab: 32, hidden: 16, intermediate: 32, layers: 2, heads: 2, kv_heads: 1}
dataset:   {type: synthetic, samples: 32, test_samples: 8, tokens: {vocabulary: 32, length: 16, min_length: 4}, collate: pad}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: adamw, lr: 0.001}
run:       {epochs: 1, batch_size: 8, threads: 1, trace: true}
)");
  auto [code, out] = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("r.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  const std::string costs = dir.file("run/metrics/costs.json");
  EXPECT_HAS(testing::read_text(costs), "\"ragged\": true");
  std::tie(code, out) = pipelab(fmt::format("simulate {} --costs {} --tokens 4", dir.file("r.yaml"), costs));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "were measured on ragged text: each figure is already the mean over the run's micro-batches");
  std::tie(code, out) = pipelab(fmt::format("plan {} --devices 2 --costs {} --tokens 4", dir.file("r.yaml"), costs));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--tokens 4: the costs");
  // Without --tokens the run's own mix replays.
  std::tie(code, out) = pipelab(fmt::format("simulate {} --costs {}", dir.file("r.yaml"), costs));
  EXPECT_EQ(code, 0) << out;
}

TEST(HardeningSixth, PlanSaysWhyASchemeListCannotBePlanned) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const std::string plan = fmt::format("plan {} --devices 2 --device-flops 1 ", dir.file("e.yaml"));
  auto [code, out] = pipelab(plan + "--schemes gpipee");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--schemes: no scheme is registered as 'gpipee'. Fix: use one of: gpipe");
  std::tie(code, out) = pipelab(plan + "--schemes gpipe:chunks=4");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--schemes gpipe:chunks=4: plan takes scheme names only");
  std::tie(code, out) = pipelab(plan + "--schemes seq1f1b");
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--schemes seq1f1b: the scheme cannot run this experiment:");
  EXPECT_HAS(out, "sequence segments, but the model computes whole sequences only");
}

TEST(HardeningSixth, APlannedSweepCellEmitsAnExperimentRunTakes) {
  testing::TempDir dir;
  testing::write_text(dir.file("s.yaml"), std::string(kExperiment) + "sweep: {output: " + dir.file("sweep") +
                                              ", grid: {optimizer.lr: [0.05, 0.1]}}\n");
  auto [code, out] = pipelab(fmt::format("plan {} --devices 2 --device-flops 1 --emit {}", dir.file("s.yaml"),
                                         dir.file("best.yaml")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(testing::read_text(dir.file("best.yaml")).find("sweep:"), std::string::npos);
  std::tie(code, out) = pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("best.yaml"), dir.file("run")));
  EXPECT_EQ(code, 0) << out;
}

TEST(HardeningSixth, ASetOfTheSchemesTypeMakesANewSection) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, out] = pipelab(fmt::format("run {} --quiet --set run.output={} --set scheme.type=pipedream_flush "
                                               "--set run.epochs=1",
                                               dir.file("e.yaml"), dir.file("run")));
  EXPECT_EQ(code, 0) << out;
  // pipedream_flush takes chunks too: kept. `single` takes none.
  EXPECT_EQ(out.find("dropped"), std::string::npos) << out;
  const auto [single, said] = pipelab(fmt::format("run {} --quiet --set run.output={} --set scheme.type=single "
                                                  "--set run.epochs=1",
                                                  dir.file("e.yaml"), dir.file("single")));
  EXPECT_EQ(single, 0) << said;
  EXPECT_HAS(said, "note: --set scheme.type=single: the scheme section is now single's: dropped chunks (the file's "
                   "gpipe options it does not take)");
}

TEST(HardeningSixth, OutputFoldersAndUnreachedBaselinesAreNamed) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  const auto [code, out] = pipelab(fmt::format("simulate {} --device-flops 1 --svg {}", dir.file("e.yaml"), dir.path()));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--svg " + dir.path() + ": a folder");
}

// A sweep timed on a cluster, with a target no run reaches: the table names the unreached
// baseline, leaves simulated figures (the same for any seed) without the float32 note, and the
// plot draws the target.
TEST(HardeningSixth, TablesAndPlotsOfATargetNoRunReached) {
  testing::TempDir dir;
  testing::write_text(dir.file("s.yaml"), std::string(kExperiment) +
                                              "sweep: {output: " + dir.file("sweep") +
                                              ", grid: {scheme.type: [gpipe, pipedream_flush]}}\n");
  auto [code, out] = pipelab(fmt::format("sweep {} --set run.epochs=1 --set run.targets.test_acc=99.9 --cluster h100_sxm",
                                         dir.file("s.yaml")));
  ASSERT_EQ(code, 0) << out;
  std::tie(code, out) = pipelab(fmt::format("table {} --rows scheme --metric time_to_target.test_acc.simulated_seconds "
                                            "--speedup-vs scheme=gpipe --out {}",
                                            dir.file("sweep"), dir.file("t")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--speedup-vs scheme=gpipe: its cell has 1 finished run, and it has no "
                  "time_to_target.test_acc.simulated_seconds: the run never reached its target");
  std::tie(code, out) = pipelab(fmt::format("table {} --rows scheme --metric simulated.samples_per_second --out {}",
                                            dir.file("sweep"), dir.file("t")));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("may be noise"), std::string::npos) << out;
  std::tie(code, out) = pipelab(fmt::format("plot {} --x simulated_time --out {}", dir.file("sweep"), dir.file("p.svg")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_HAS(testing::read_text(dir.file("p.svg")), "target test_acc = 99.9 (run.targets)");
}

TEST(HardeningSixth, ATinyClusterMemoryIsRefusedAndAPlanOverItIsSaid) {
  testing::TempDir dir;
  const auto cluster = [](const std::string& gib) {
    return "name: tiny\ndevice: {tflops: {float32: 10}, memory_gbs: 100, memory_gib: " + gib + "}\nlink: {gbps: 100}\n";
  };
  testing::write_text(dir.file("nano.yaml"), cluster("1.0e-9"));
  testing::write_text(dir.file("small.yaml"), cluster("0.001"));
  testing::write_text(dir.file("e.yaml"), kExperiment);
  auto [code, out] = pipelab(fmt::format("run {} --quiet --set run.output={} --cluster {}", dir.file("e.yaml"),
                                         dir.file("run"), dir.file("nano.yaml")));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "device.memory_gib: 1e-09 GiB is less than a megabyte");
  // 16 MB of weights on devices of 1 MiB: timed, and said to be a run that could not happen.
  testing::write_text(dir.file("wide.yaml"), std::regex_replace(kExperiment, std::regex("\\[12, 32, 32, 3\\]"),
                                                                "[12, 2048, 2048, 3]"));
  std::tie(code, out) = pipelab(fmt::format("run {} --set run.output={} --set run.epochs=1 --cluster {}",
                                            dir.file("wide.yaml"), dir.file("wide"), dir.file("small.yaml")));
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "warning: the plan needs");
  EXPECT_HAS(out, "whose devices hold 0.001 GiB: the simulated times are of a run that could not happen there");
}

}  // namespace
}  // namespace pipelab::hardening_sixth_test
