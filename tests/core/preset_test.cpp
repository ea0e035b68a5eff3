// Presets (core/config/presets.h): a file's named settings, applied by --preset NAME (which
// reaches the loader as preset=NAME), under the user's own --set values; every mistake names
// the file's line and the preset.
#include <gtest/gtest.h>

#include "core/experiment/experiment.h"
#include "tests/support/helpers.h"

namespace pipelab::preset_test {
namespace {

const char* kFile = R"(model: {type: mlp, sizes: [8, 16, 3]}
dataset: {type: synthetic, samples: 64, test_samples: 32, shape: [8], classes: 3}
partition: {stages: 2}
scheme: {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.1}
run: {epochs: 5, batch_size: 16}
presets:
  mini: {run.epochs: 1, dataset.limit: 32, scheme: {type: naive}}
  odd: {run.epochs: -1}
  adam: {optimizer: {type: adam, lr: 0.01}, run: {epochs: 2, batch_size: 8}}
)";

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

std::string error_of(const std::string& yaml, const std::vector<std::string>& sets) {
  return testing::user_error([&] { Experiment::parse(yaml, "demo.yaml", sets); });
}

TEST(Preset, UnchosenItIsIgnoredChosenItsSettingsApply) {
  const Experiment plain = Experiment::parse(kFile, "demo.yaml");
  EXPECT_EQ(plain.run.epochs, 5);
  EXPECT_EQ(plain.limits.limit, 0);
  EXPECT_EQ(plain.scheme->type(), "gpipe");
  const Experiment mini = Experiment::parse(kFile, "demo.yaml", {"preset=mini"});
  EXPECT_EQ(mini.run.epochs, 1);
  EXPECT_EQ(mini.limits.limit, 32);
  EXPECT_EQ(mini.scheme->type(), "naive");
  EXPECT_EQ(mini.run.batch_size, 16);  // what the preset does not name stays the file's
}

TEST(Preset, TheUsersSetWinsWhereverItStands) {
  // Before or after the preset on the command line, at the preset's path or inside it.
  EXPECT_EQ(Experiment::parse(kFile, "demo.yaml", {"run.epochs=3", "preset=mini"}).run.epochs, 3);
  EXPECT_EQ(Experiment::parse(kFile, "demo.yaml", {"preset=mini", "run.epochs=3"}).run.epochs, 3);
  const Experiment e = Experiment::parse(kFile, "demo.yaml", {"preset=mini", "scheme.type=gpipe"});
  EXPECT_EQ(e.scheme->type(), "gpipe");
  EXPECT_EQ(e.run.epochs, 1);
}

// A --set under a preset's entry changes that key of the preset's value; the entry's other
// keys stay the preset's (the fifth hardening probe: the whole entry was dropped, and a
// preset's Adam trained as the file's SGD).
TEST(Preset, ASetUnderAPresetsEntryChangesOnlyItsKey) {
  const Experiment e = Experiment::parse(kFile, "demo.yaml", {"preset=adam", "optimizer.lr=0.5", "run.epochs=3"});
  EXPECT_EQ(e.optimizer->type(), "adam");
  EXPECT_DOUBLE_EQ(e.optimizer->base_lr(), 0.5);
  EXPECT_EQ(e.run.epochs, 3);
  EXPECT_EQ(e.run.batch_size, 8);
  // On the command line before the preset, the same.
  const Experiment before = Experiment::parse(kFile, "demo.yaml", {"optimizer.lr=0.5", "preset=adam"});
  EXPECT_EQ(before.optimizer->type(), "adam");
  EXPECT_DOUBLE_EQ(before.optimizer->base_lr(), 0.5);
  // A --set of the whole section wins whole.
  EXPECT_EQ(Experiment::parse(kFile, "demo.yaml", {"preset=adam", "optimizer={type: sgd, lr: 0.2}"}).optimizer->type(),
            "sgd");
}

TEST(Preset, MistakesNameTheLineThePresetAndTheFix) {
  std::string msg = error_of(kFile, {"preset=minni"});
  EXPECT_HAS(msg, "--preset minni: preset: the file has no preset 'minni'. Fix: use one of: mini, adam, odd.");
  msg = error_of(kFile, {"preset=odd"});
  EXPECT_HAS(msg, "demo.yaml:9:9 (preset odd): run.epochs:");
  msg = error_of("run: {epochs: 1, batch_size: 4}\n", {"preset=mini"});
  EXPECT_HAS(msg, "the file has no presets: section, so there is no preset 'mini'");
  // Malformed sections are errors whether or not a preset is chosen.
  msg = error_of(std::string(kFile) + "  bad: [run.epochs, 1]\n", {});
  EXPECT_HAS(msg, "demo.yaml:11:8: presets.bad: a preset is a mapping of settings");
  msg = error_of(std::string(kFile) + "  loop: {preset: mini}\n", {});
  EXPECT_HAS(msg, "demo.yaml:11:10: presets.loop.preset: a preset cannot choose or define presets");
  // A preset's key path under an unknown section names the preset's line.
  msg = error_of(std::string(kFile) + "  typo: {optimzer.lr: 2}\n", {"preset=typo"});
  EXPECT_HAS(msg, "demo.yaml:11:10 (preset typo): optimzer: unknown section 'optimzer'");
  // A key that is no name (null, ~, a complex key) anywhere: its line, not an internal error.
  for (const char* key : {"null", "~", "? [a, b]"}) {
    msg = error_of(std::string(kFile) + "  " + key + ": {run.epochs: 2}\n", {});
    EXPECT_HAS(msg, "demo.yaml:11:");
    EXPECT_HAS(msg, "not a name");
  }
}

}  // namespace
}  // namespace pipelab::preset_test
