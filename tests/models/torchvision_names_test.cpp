// init.names: torchvision, for every zoo model with torchvision's layout: a torchvision model's
// state dict (random weights and batch-norm statistics, float64) loads strictly through the
// model's published names and gives torchvision's eval-mode logits. The torchvision side is
// tests/models/torchvision_names.py, run here when Python's torchvision is installed.
#include <gtest/gtest.h>

#include <map>

#include "core/model/tensor_names.h"
#include "core/run/runner.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::torchvision_names_test {
namespace {

bool torchvision_available() {
  static const bool available = testing::shell("python3 -c 'import torchvision' >/dev/null 2>&1").first == 0;
  return available;
}

TEST(TorchvisionNames, TheSameLogitsAsTorchvision) {
  if (!torchvision_available()) GTEST_SKIP() << "Python's torchvision is not installed (tools/setup.sh --all installs it)";
  testing::TempDir dir;
  const auto [rc, out] =
      testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/models/torchvision_names.py " + dir.file("tv") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"resnet18", "{type: resnet, depth: 18, stem: imagenet}"},
      {"resnet50", "{type: resnet, depth: 50, stem: imagenet}"},
      {"vgg16", "{type: vgg16}"},
      {"mobilenet_v2", "{type: mobilenet_v2}"},
      {"densenet121", "{type: densenet121, stem: imagenet}"},
      {"googlenet", "{type: googlenet, variant: torchvision}"},
      {"inception_v3", "{type: inception_v3}"}};
  for (const auto& [name, section] : cases) {
    const c10::IValue io = load_pt(dir.file("tv/" + name + "_io.pt"));
    std::map<std::string, at::Tensor> tensors;
    for (const auto& kv : to_tensor_dict(io, name)) tensors[kv.first] = kv.second;
    const at::Tensor x = tensors.at("x"), want = tensors.at("logits");
    const ModelDef def = testing::define_model(section, testing::images(3, x.size(2), x.size(3), 10));
    std::vector<Block> blocks = testing::build_model(def);
    for (Block& b : blocks) {
      b.module.ptr()->to(at::kDouble);
      b.module.ptr()->eval();
    }
    std::vector<std::string> dropped;
    const std::string file = dir.file("tv/" + name + ".pt");
    testing::load_strictly(blocks, rename_tensors(load_tensor_dict(file), def.published_names.at("torchvision"), file, &dropped),
                  name);
    // Only inception_v3's and googlenet's auxiliary classifiers are dropped.
    EXPECT_EQ(dropped.empty(), name != "inception_v3" && name != "googlenet") << name;
    const at::Tensor got = testing::forward(blocks, x);
    ASSERT_EQ(got.sizes(), want.sizes()) << name;
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-5) << name;
    EXPECT_GT(want.abs().max().item<double>(), 1e-3) << name << ": logits not trivially small";
  }
}

/// The log of one epoch of a 10-class resnet18 run started from torchvision's 1000-class
/// resnet18 state dict (random weights) with `init` as its init section.
std::string fine_tune_log(const std::string& init) {
  testing::TempDir dir;
  const auto [rc, out] = testing::shell(
      "python3 -c 'import torch, torchvision; torch.manual_seed(0); "
      "torch.save(torchvision.models.resnet18().state_dict(), \"" + dir.file("resnet18.pth") + "\")' 2>&1");
  EXPECT_EQ(rc, 0) << out;
  const std::string yaml = R"(
model:     {type: resnet, depth: 18, stem: imagenet}
dataset:   {type: synthetic, samples: 8, test_samples: 4, shape: [3, 32, 32], classes: 10}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.01}
run:       {epochs: 1, batch_size: 4, seed: 0}
init:      )" + init + "\n";
  Experiment e = testing::experiment(yaml, dir.file("run"), {"init.from=" + dir.file("resnet18.pth")});
  Runner(e, {false, true}).run();
  return testing::read_text(dir.file("run/log.txt"));
}

TEST(TorchvisionNames, FineTunesA1000ClassResnet18OnTenClasses) {
  // torchvision's resnet18 as published (1000 classes) onto a 10-class run: its names map,
  // every tensor but the classifier loads, and init.skip_mismatched keeps the 10-class head
  // at its initial values, named in the log.
  if (!torchvision_available()) GTEST_SKIP() << "Python's torchvision is not installed (tools/setup.sh --all installs it)";
  const std::string log = fine_tune_log("{names: torchvision, skip_mismatched: true}");
  EXPECT_NE(log.find("2 entries of another shape skipped (init.skip_mismatched)"), std::string::npos) << log;
  EXPECT_NE(log.find("(file [1000, 512], model [10, 512])"), std::string::npos) << log;
  EXPECT_EQ(log.find("not in the file"), std::string::npos) << log;  // every other tensor loaded
}

TEST(TorchvisionNames, TheUsersRulesCombineWithTheNaming) {
  // The other way to fine-tune: a rule of one's own before torchvision's names drops the
  // published head, and the run keeps its own (not strict: the file lacks it now).
  if (!torchvision_available()) GTEST_SKIP() << "Python's torchvision is not installed (tools/setup.sh --all installs it)";
  const std::string log = fine_tune_log(R"({names: [{'fc\..*': ''}, torchvision], strict: false})");
  EXPECT_NE(log.find("fc.weight, fc.bias"), std::string::npos) << log;  // named as dropped
  EXPECT_EQ(log.find("another shape"), std::string::npos) << log;
}

}  // namespace
}  // namespace pipelab::torchvision_names_test
