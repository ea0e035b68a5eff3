// The presets price by operator class (docs/simulate.md, "Presets against published
// single-GPU throughput"): TensorFloat-32 takes a float32 run's dense convolutions and
// nothing else, and a preset's costs are named derived, a cluster file's classes calibrated.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::preset_classes_test {
namespace {

constexpr const char* kCnn =
    "model: {type: cnn, channels: [16, 32], hidden: 32}\n"
    "dataset: {type: synthetic, samples: 64, shape: [3, 32, 32], classes: 10}\n"
    "partition: {stages: 1}\nscheme: {type: single}\noptimizer: {type: sgd, lr: 0.1}\n"
    "run: {epochs: 1, batch_size: 64}\n";
constexpr const char* kMlp =
    "model: {type: mlp, sizes: [256, 512, 10]}\n"
    "dataset: {type: synthetic, samples: 64, shape: [256], classes: 10}\n"
    "partition: {stages: 1}\nscheme: {type: single}\noptimizer: {type: sgd, lr: 0.1}\n"
    "run: {epochs: 1, batch_size: 64}\n";

/// An A100-like cluster file, with or without a TensorFloat-32 rate ten times float32's.
std::string cluster(bool tf32) {
  return fmt::format(
      "name: x\nsource: a test\ndevice: {{tflops: {{float32: 10{}, bfloat16: 100}}, memory_gbs: 1000, "
      "memory_gib: 40, classes: {{memory: 0.9}}}}\nlink: {{gbps: 100}}\n",
      tf32 ? ", tf32: 100" : "");
}

/// `simulate`'s step for the experiment `file` on the cluster `on`, with `extra` flags.
double step(const std::string& file, const std::string& on, const std::string& extra = "") {
  testing::TempDir dir;
  const auto [code, out] =
      testing::pipelab(fmt::format("simulate {} --cluster {} --json {} {}", file, on, dir.file("s.json"), extra));
  EXPECT_EQ(code, 0) << out;
  return nlohmann::json::parse(testing::read_text(dir.file("s.json"))).at("schemes").at(0).at("step_seconds").get<double>();
}

TEST(PresetClasses, TensorFloat32TakesAFloat32RunsConvolutionsAlone) {
  testing::TempDir dir;
  testing::write_text(dir.file("cnn.yaml"), kCnn);
  testing::write_text(dir.file("mlp.yaml"), kMlp);
  testing::write_text(dir.file("with.yaml"), cluster(true));
  testing::write_text(dir.file("without.yaml"), cluster(false));
  // float32: the CNN's convolutions compute ten times faster; the MLP's products do not move.
  EXPECT_LT(step(dir.file("cnn.yaml"), dir.file("with.yaml")), step(dir.file("cnn.yaml"), dir.file("without.yaml")));
  EXPECT_DOUBLE_EQ(step(dir.file("mlp.yaml"), dir.file("with.yaml")), step(dir.file("mlp.yaml"), dir.file("without.yaml")));
  // bfloat16 has a rate of its own: the TensorFloat-32 figure plays no part.
  EXPECT_DOUBLE_EQ(step(dir.file("cnn.yaml"), dir.file("with.yaml"), "--set run.amp=bf16"),
                   step(dir.file("cnn.yaml"), dir.file("without.yaml"), "--set run.amp=bf16"));
}

TEST(PresetClasses, APresetsCostsAreDerivedAClusterFilesClassesCalibrated) {
  testing::TempDir dir;
  testing::write_text(dir.file("cnn.yaml"), kCnn);
  testing::write_text(dir.file("mine.yaml"), cluster(false));
  const auto [preset_code, preset] = testing::pipelab(fmt::format("simulate {} --cluster a100_sxm", dir.file("cnn.yaml")));
  ASSERT_EQ(preset_code, 0) << preset;
  EXPECT_NE(preset.find("checked: derived from a preset's rates per operator class"), std::string::npos) << preset;
  const auto [file_code, file] = testing::pipelab(fmt::format("simulate {} --cluster {}", dir.file("cnn.yaml"),
                                                              dir.file("mine.yaml")));
  ASSERT_EQ(file_code, 0) << file;
  EXPECT_NE(file.find("checked: calibrated per operator class"), std::string::npos) << file;
}

}  // namespace
}  // namespace pipelab::preset_classes_test
