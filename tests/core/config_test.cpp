// Every configuration error path: one message with file:line:column (or the --set that
// caused it), the key path and the fix; and no output folder when a run is rejected.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/helpers.h"

namespace pipelab::config_test {
namespace {

const char* kBase = R"(model:
  type: mlp
  sizes: [8, 16, 3]
dataset:
  type: synthetic
  samples: 64
  test_samples: 32
  shape: [8]
  classes: 3
partition:
  stages: 2
  balance: [1, 1]
scheme:
  type: gpipe
  chunks: 2
optimizer:
  type: sgd
  lr: 0.1
run:
  epochs: 1
  batch_size: 16
)";

/// The error of parsing and building kBase with `overrides` (or of `yaml` when given).
std::string error_of(const std::vector<std::string>& overrides, const std::string& yaml = kBase) {
  testing::TempDir dir;
  return testing::user_error([&] {
    Experiment e = testing::experiment(yaml, dir.file("run"), overrides);
    Runner runner(e, {false, true});
  });
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  return s.replace(p, from.size(), to);
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

TEST(Config, BaseIsValid) { EXPECT_EQ(error_of({}), ""); }

TEST(Config, UnknownKeySuggestsClosest) {
  const std::string msg = error_of({}, replace(kBase, "  lr: 0.1\n", "  lr: 0.1\n  momentun: 0.9\n"));
  EXPECT_HAS(msg, "test.yaml:19:3: optimizer.momentun: unknown key 'momentun' in 'optimizer'");
  EXPECT_HAS(msg, "Fix: remove it or use one of: momentum,");
}

TEST(Config, WrongType) {
  const std::string msg = error_of({}, replace(kBase, "lr: 0.1", "lr: fast"));
  EXPECT_HAS(msg, "test.yaml:18:7: optimizer.lr: expected a finite number, got 'fast'");
  EXPECT_HAS(msg, "Fix: set optimizer.lr to a finite number");
}

TEST(Config, OutOfRange) {
  const std::string msg = error_of({}, replace(kBase, "lr: 0.1", "lr: 0.1\n  momentum: 1.5"));
  EXPECT_HAS(msg, "test.yaml:19:13: optimizer.momentum: must be a number in [0, 1), got 1.5");
  EXPECT_HAS(error_of({}, replace(kBase, "epochs: 1", "epochs: 0")), "run.epochs: must be a number in [1, 1000000], got 0");
  EXPECT_HAS(error_of({}, replace(kBase, "chunks: 2", "checkpoint: sometimes")),
             "scheme.checkpoint: 'sometimes' is not one of always, except_last, never");
}

TEST(Config, MissingRequiredKeyAndSection) {
  const std::string msg = error_of({}, replace(kBase, "  lr: 0.1\n", ""));
  EXPECT_HAS(msg, "test.yaml:17:3: optimizer: missing required key 'lr'");
  EXPECT_HAS(msg, "Fix: add `lr: <a number>` to optimizer");
  EXPECT_HAS(error_of({}, replace(kBase, "scheme:\n  type: gpipe\n  chunks: 2\n", "")), "missing the 'scheme' section");
}

TEST(Config, UnknownNamesListClosestFirst) {
  const std::string msg = error_of({}, replace(kBase, "type: gpipe", "type: gpip"));
  EXPECT_HAS(msg, "test.yaml:14:9: scheme.type: unknown scheme 'gpip'; valid: gpipe,");
  EXPECT_HAS(error_of({}, replace(kBase, "type: sgd", "type: adan")), "valid: adam, adamw");
  EXPECT_HAS(error_of({"run.executor=sequentail"}), "--set run.executor=sequentail: run.executor.type: unknown executor");
  EXPECT_HAS(error_of({}, kBase + std::string("sweeps: {}\n")), "test.yaml:22:1: sweeps: unknown section 'sweeps'");
}

TEST(Config, BadBalance) {
  EXPECT_HAS(error_of({}, replace(kBase, "balance: [1, 1]", "balance: [1, 2]")),
             "test.yaml:12:12: partition.balance: the counts [1, 2] sum to 3, but the model has 2 blocks");
  EXPECT_HAS(error_of({}, replace(kBase, "balance: [1, 1]", "balance: [2]")),
             "partition.balance: 1 entries for 2 stages");
  EXPECT_HAS(error_of({}, replace(kBase, "balance: [1, 1]", "balance: [2, 0]")),
             "every stage needs at least one block");
  EXPECT_HAS(error_of({}, replace(kBase, "balance: [1, 1]", "balance: spectrain_4")),
             "partition.balance: this model has no split named 'spectrain_4'");
  EXPECT_HAS(error_of({"partition.stages=3"}), "--set partition.stages=3: partition.stages: 3 stages but the model has only 2 blocks");
}

TEST(Config, MissingFiles) {
  EXPECT_HAS(error_of({"init.from=no/such/weights.pt"}),
             "--set init.from=no/such/weights.pt: init.from: file 'no/such/weights.pt' not found");
  const std::string msg = error_of(
      {}, replace(kBase, "  type: synthetic\n  samples: 64\n  test_samples: 32\n  shape: [8]\n  classes: 3\n",
                  "  type: tensors\n  path: missing.pt\n"));
  EXPECT_HAS(msg, "test.yaml:6:9: dataset.path: file 'missing.pt' not found");
  EXPECT_HAS(msg, "Fix: give the path of a file written by torch.save");
  EXPECT_HAS(testing::user_error([] { Experiment::load("/no/such/experiment.yaml"); }),
             "/no/such/experiment.yaml: file not found");
}

TEST(Config, InvalidYaml) {
  EXPECT_HAS(error_of({}, replace(kBase, "lr: 0.1", "lr: [0.1")), "invalid YAML");
  EXPECT_HAS(error_of({"optimizer.lr=[1"}), "--set optimizer.lr=[1: the value is not valid YAML");
  EXPECT_HAS(error_of({"optimizer.lr"}), "--set optimizer.lr: expected key.path=value");
}

TEST(Config, OverridesNameTheFlag) {
  EXPECT_HAS(error_of({"optimizer.lr=-1"}), "--set optimizer.lr=-1: optimizer.lr: must be a number in (0, 1e+30], got -1");
  EXPECT_HAS(error_of({"optimizer.lr.x=1"}), "'optimizer.lr' is not a section");
  EXPECT_EQ(error_of({"optimizer.lr=0.5", "run.epochs=2"}), "");
}

TEST(Config, ProblemsFoundAfterParsing) {
  EXPECT_HAS(error_of({}, replace(kBase, "sizes: [8, 16, 3]", "sizes: [9, 16, 3]")),
             "test.yaml:3:10: model.sizes: the first width is 9, but examples have 8 features (shape [8])");
  EXPECT_HAS(error_of({"run.devices=[cpu, cpu, cpu]"}), "run.devices: 3 devices for 2 stages");
  EXPECT_HAS(error_of({"run.devices=[tpu]"}), "run.devices: 'tpu' is not a device");
  EXPECT_HAS(error_of({"run.batch_size=1"}), "splits each mini-batch into 2 micro-batches");
  EXPECT_HAS(error_of({"run.batch_size=100"}), "fewer than one batch of 100");
  EXPECT_HAS(error_of({"optimizer.nesterov=true"}), "optimizer.nesterov: Nesterov momentum needs momentum > 0");
  EXPECT_HAS(error_of({"optimizer.type=adam", "optimizer.betas=[0.9]"}), "optimizer.betas: must be two numbers in [0, 1)");
}

TEST(Config, RejectedRunWritesNothing) {
  testing::TempDir dir;
  const std::string out = dir.file("never");
  EXPECT_NE(testing::user_error([&] {
              Experiment e = testing::experiment(replace(kBase, "balance: [1, 1]", "balance: [3, 1]"), out);
              Runner runner(e, {false, true});
              runner.run();
            }),
            "");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Config, FinishedRunIsNotOverwritten) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kBase, dir.file("run"));
  Runner(e, {false, true}).run();
  Experiment again = testing::experiment(kBase, dir.file("run"));
  EXPECT_HAS(testing::user_error([&] { Runner(again, {false, true}).run(); }), "already holds a finished run");
  EXPECT_NO_THROW(Runner(again, {true, true}).run());
}

// An overwritten run never shows an earlier run's files, even when it stops before writing
// its own: its first epoch interrupted, the folder holds no final weights, trace or snapshot.
TEST(Config, OverwrittenRunKeepsNoFileOfTheEarlierOne) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kBase, dir.file("run"), {"run.trace=true", "run.epochs=2"});
  Runner(e, {false, true}).run();
  ASSERT_TRUE(std::filesystem::exists(dir.file("run/checkpoints/final.pt")));
  ASSERT_TRUE(std::filesystem::exists(dir.file("run/trace.json")));
  testing::write_text(dir.file("run/checkpoints/epoch_9_stage_0.pt"), "an earlier run's snapshot");
  Experiment again = testing::experiment(kBase, dir.file("run"), {"run.trace=false", "run.epochs=2"});
  RunnerOptions options{true, true};
  options.stop_after = 1;
  Runner(again, options).run();
  for (const char* gone : {"checkpoints/final.pt", "checkpoints/epoch_9_stage_0.pt", "trace.json", "summary.json",
                           "metrics/costs.json", "metrics/actions.csv"}) {
    EXPECT_FALSE(std::filesystem::exists(dir.file(std::string("run/") + gone))) << gone;
  }
  EXPECT_TRUE(std::filesystem::exists(dir.file("run/checkpoints/state.pt")));  // this run's, to resume
}

TEST(Config, ResolvedConfigRerunsTheSameExperiment) {
  testing::TempDir dir;
  Experiment e = testing::experiment(kBase, dir.file("a"));
  Runner(e, {false, true}).run();
  // The resolved config.yaml is itself a valid experiment file with every default filled in.
  Experiment again = Experiment::load(dir.file("a/config.yaml"), {"run.output=" + dir.file("b"), "run.progress=false"});
  Runner(again, {false, true}).run();
  EXPECT_EQ(testing::read_text(dir.file("a/metrics/steps.csv")), testing::read_text(dir.file("b/metrics/steps.csv")));
  const std::string config = testing::read_text(dir.file("a/config.yaml"));
  EXPECT_HAS(config, "git_revision:");
  EXPECT_HAS(config, "checkpoint: except_last");
  EXPECT_HAS(config, "balance: [1, 1]");
}

}  // namespace
}  // namespace pipelab::config_test
