// `pipelab eval RUN_DIR` (a finished run's weights on its own data, in one process) and `pipelab
// run --dump-batches N` (the first N steps' micro-batches as the stages read them, in a
// safetensors file Python reads), each against what the run itself recorded.
#include <gtest/gtest.h>

#include <fstream>

#include "core/io/safetensors.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::eval_dump_test {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const char* kExperiment = R"(
model:     {type: mlp, sizes: [12, 32, 32, 3], dropout: 0.1}
dataset:   {type: synthetic, samples: 64, test_samples: 24, shape: [12], classes: 3}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05}
run:       {epochs: 2, batch_size: 16, seed: 1, threads: 1, progress: false, executor: {type: threaded}}
)";

/// The last line of metrics/epochs.csv, by column name.
std::map<std::string, std::string> last_epoch(const std::string& run) {
  std::ifstream in(run + "/metrics/epochs.csv");
  std::string header, line, last;
  std::getline(in, header);
  while (std::getline(in, line)) last = line;
  std::map<std::string, std::string> out;
  std::istringstream h(header), v(last);
  std::string name, value;
  while (std::getline(h, name, ',') && std::getline(v, value, ',')) out[name] = value;
  return out;
}

TEST(Eval, AFinishedRunsWeightsGiveItsLastEpochsTestFigures) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  auto [code, out] = testing::pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  std::tie(code, out) = testing::pipelab("eval " + dir.file("run"));
  ASSERT_EQ(code, 0) << out;
  const auto epoch = last_epoch(dir.file("run"));
  EXPECT_HAS(out, fmt::format("test loss {:.4f}  acc {:6.2f}%", std::stod(epoch.at("test_loss")), std::stod(epoch.at("test_acc"))));
  EXPECT_HAS(out, "on its test split (24 examples)");
  std::tie(code, out) = testing::pipelab("eval " + dir.file("run") + " --split train");
  ASSERT_EQ(code, 0) << out;
  EXPECT_HAS(out, "on its train split (64 examples, in evaluation mode)");
  EXPECT_HAS(out, "train loss ");
  // An earlier checkpoint; mistakes named.
  std::tie(code, out) = testing::pipelab("eval " + dir.file("run") + " --checkpoint " + dir.file("nope.pt"));
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "--checkpoint " + dir.file("nope.pt") + ": no such file");
  std::tie(code, out) = testing::pipelab("eval " + dir.path());
  EXPECT_EQ(code, 2) << out;
  EXPECT_HAS(out, "no config.yaml, so not a run's folder");
  std::tie(code, out) = testing::pipelab("eval " + dir.file("run") + " --split valid");
  EXPECT_EQ(code, 2) << out;
}

TEST(DumpBatches, TheFirstStepsMicroBatchesAreWhatTheStagesRead) {
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), kExperiment);
  auto [code, out] = testing::pipelab(
      fmt::format("run {} --quiet --set run.output={} --dump-batches 2", dir.file("e.yaml"), dir.file("run")));
  ASSERT_EQ(code, 0) << out;
  const TensorDict dump = load_safetensors(dir.file("run/batches.safetensors"));
  std::set<std::string> names;
  for (const auto& kv : dump) names.insert(kv.first);
  // 2 steps of 2 micro-batches of 8 examples: inputs, targets and example ids each.
  for (int step = 0; step < 2; ++step) {
    for (int mb = 0; mb < 2; ++mb) {
      for (const char* part : {"x", "y"}) EXPECT_TRUE(names.count(fmt::format("step{}.mb{}.{}", step, mb, part))) << step << mb << part;
    }
  }
  EXPECT_FALSE(names.count("step2.mb0.x"));
  for (const auto& kv : dump) {
    if (kv.first.size() > 2 && kv.first.substr(kv.first.size() - 2) == ".x") EXPECT_EQ(kv.second.sizes(), (std::vector<int64_t>{8, 12}));
  }
  // The same batches without the dump train to the same weights: recording changes nothing.
  std::tie(code, out) = testing::pipelab(fmt::format("run {} --quiet --set run.output={}", dir.file("e.yaml"), dir.file("plain")));
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(testing::identical(load_tensor_dict(dir.file("run/checkpoints/final.pt")),
                                 load_tensor_dict(dir.file("plain/checkpoints/final.pt"))));
  if (testing::python_torch_available()) {
    const auto [rc, py] = testing::shell(
        "python3 -c \"from safetensors.torch import load_file; d = load_file('" + dir.file("run/batches.safetensors") +
        "'); print(sorted(d)[0], tuple(d['step0.mb0.x'].shape))\" 2>&1");
    EXPECT_EQ(rc, 0) << py;
    EXPECT_HAS(py, "(8, 12)");
  }
  std::tie(code, out) = testing::pipelab(
      fmt::format("run {} --quiet --set run.output={} --dump-batches -1", dir.file("e.yaml"), dir.file("bad")));
  EXPECT_EQ(code, 2) << out;
}

}  // namespace
}  // namespace pipelab::eval_dump_test
