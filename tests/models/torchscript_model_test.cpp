// `model: {type: torchscript}`: modules scripted in Python (tests/models/torchscript_model.py,
// run when Python's torch is installed) train in pipelab with the losses the Python modules
// give under the same loop (float64, 1e-10), on one stage and cut into two, and every
// executor agrees bitwise; a module that is not its children in order is refused.
#include <gtest/gtest.h>

#include <filesystem>

#include <map>

#include "core/io/pt_file.h"
#include "tests/support/helpers.h"

namespace pipelab::torchscript_model_test {
namespace {

bool torch_available() {
  static const bool available = testing::shell("python3 -c 'import torch' >/dev/null 2>&1").first == 0;
  return available;
}

std::string experiment_yaml(const std::string& dir, const std::string& module) {
  return fmt::format(R"(
model:     {{type: torchscript, file: {0}/{1}.pt}}
dataset:   {{type: tensors, path: {0}/data.pt, test_path: {0}/data.pt}}
partition: {{stages: 1}}
scheme:    {{type: single}}
optimizer: {{type: sgd, lr: 0.1, momentum: 0.9}}
run:       {{epochs: 4, batch_size: 32, seed: 0, threads: 1, dtype: float64}}
)",
                     dir, module);
}

class TorchScriptModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch_available()) GTEST_SKIP() << "Python's torch is not installed (tools/setup.sh installs it)";
    const auto [rc, out] =
        testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/models/torchscript_model.py " + dir_.file("py") + " 2>&1");
    ASSERT_EQ(rc, 0) << out;
  }
  std::string py() const { return dir_.file("py"); }
  testing::TempDir dir_;
};

TEST_F(TorchScriptModel, TrainsAsThePythonModuleDoes) {
  for (const char* module : {"sequential", "children"}) {
    const c10::IValue saved = load_pt(py() + "/" + module + "_losses.pt");
    const at::Tensor want = to_tensor_dict(saved, module).front().second;
    for (const char* cut : {"scheme={type: single}", "scheme={type: gpipe, chunks: 2}"}) {
      std::vector<std::string> sets{cut};
      if (std::string(cut).find("gpipe") != std::string::npos) sets.push_back("partition.stages=2");
      const std::string out = dir_.file(fmt::format("run_{}_{}", module, sets.size()));
      Experiment e = testing::experiment(experiment_yaml(py(), module), out, sets);
      Runner runner(e, {false, true});
      const RunSummary s = runner.run();
      ASSERT_EQ(s.history.size(), static_cast<size_t>(want.size(0))) << module;
      for (size_t k = 0; k < s.history.size(); ++k) {
        EXPECT_NEAR(s.history[k].train_loss, want[static_cast<int64_t>(k)].item<double>(), 1e-10)
            << module << " " << cut << " step " << k;
      }
    }
  }
}

TEST_F(TorchScriptModel, EveryExecutorAgreesBitwise) {
  const std::vector<std::string> cut{"scheme={type: gpipe, chunks: 4}", "partition.stages=2", "run.dtype=float32"};
  const auto with = [&](const std::string& executor) {
    std::vector<std::string> sets = cut;
    sets.push_back("run.executor=" + executor);
    return testing::train(experiment_yaml(py(), "sequential"), sets);
  };
  const TensorDict sequential = with("sequential");
  EXPECT_TRUE(testing::identical(sequential, with("{type: threaded, intra_op_threads: 1}")));
  std::vector<std::string> names;
  for (const auto& kv : sequential) names.push_back(kv.first);
  EXPECT_EQ(names.front(), "0.weight");  // the script's own names
}

TEST_F(TorchScriptModel, AModuleThatIsNotItsChildrenInOrderIsRefused) {
  std::string e = testing::user_error([&] { testing::train(experiment_yaml(py(), "not_chain")); });
  EXPECT_NE(e.find("the module's forward in evaluation mode is not its children's forwards in their order"),
            std::string::npos)
      << e;
  // Children called in another order than declared: the children's chain is named, not the input.
  e = testing::user_error([&] { testing::train(experiment_yaml(py(), "reversed")); });
  EXPECT_NE(e.find("child 'body', called in the order the children are declared"), std::string::npos) << e;
  EXPECT_NE(e.find("shapes cannot be multiplied"), std::string::npos) << e;
  EXPECT_EQ(e.find("Traceback"), std::string::npos) << e;
  // Equal in evaluation, not in training: the check runs in both modes.
  e = testing::user_error([&] { testing::train(experiment_yaml(py(), "train_only")); });
  EXPECT_NE(e.find("the module's forward in training mode is not its children's forwards"), std::string::npos) << e;
  e = testing::user_error([&] { testing::train(experiment_yaml(py(), "lstm_child")); });
  EXPECT_NE(e.find("child 'rnn'"), std::string::npos) << e;
  e = testing::user_error([&] { testing::experiment(experiment_yaml(py(), "missing"), "", {}); });
  EXPECT_NE(e.find("model.file"), std::string::npos) << e;
  EXPECT_NE(e.find("file not found"), std::string::npos) << e;
  std::filesystem::create_directories(py() + "/folder.pt");
  e = testing::user_error([&] { testing::experiment(experiment_yaml(py(), "folder"), "", {}); });
  EXPECT_NE(e.find("is a folder, not a regular file"), std::string::npos) << e;
  e = testing::user_error([&] { testing::train(experiment_yaml(py(), "data")); });
  EXPECT_NE(e.find("is not a TorchScript module"), std::string::npos) << e;
}

}  // namespace
}  // namespace pipelab::torchscript_model_test
