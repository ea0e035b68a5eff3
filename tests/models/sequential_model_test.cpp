// `model: {type: sequential}`: a model written in YAML. A Python nn.Sequential of the same
// layers (tests/models/sequential_model.py, run when Python's torch is installed) saves a
// state dict that loads strictly and gives the same eval-mode logits in float64; the shapes
// are inferred from the data, mistakes name their line, and the model trains as any other.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/io/pt_file.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::sequential_model_test {
namespace {

bool torch_available() {
  static const bool available = testing::shell("python3 -c 'import torch' >/dev/null 2>&1").first == 0;
  return available;
}

struct Case {
  std::string name, section;
  DataSpec data;
};

std::vector<Case> cases() {
  DataSpec text;
  text.input_shape = {6};
  text.integer_input = true;
  text.classes = 3;
  DataSpec signal;
  signal.input_shape = {4, 16};
  signal.classes = 3;
  return {
      {"vision",
       "{type: sequential, layers: [conv2d: {out: 4, kernel: 3, padding: 1}, batch_norm, relu, "
       "block: [max_pool2d: {kernel: 2}, flatten], residual: [linear: {out: 64}, gelu, layer_norm], "
       "linear: {out: 10}]}",
       testing::images(3, 8, 8, 10)},
      {"text",
       "{type: sequential, layers: [embedding: {num: 20, dim: 8}, transformer_encoder_layer: {heads: 2, ff: 16}, "
       "lstm: {hidden: 8}, gru: {hidden: 6, layers: 2, bidirectional: true}, attention: {heads: 2}, flatten, "
       "linear: {out: 3}]}",
       text},
      {"signal",
       "{type: sequential, layers: [conv1d: {out: 8, kernel: 3}, group_norm: {groups: 2}, silu, "
       "avg_pool1d: {kernel: 2}, leaky_relu: {slope: 0.1}, adaptive_avg_pool1d: {out: [4]}, flatten, "
       "dropout: {p: 0.3}, linear: {out: 5}, tanh, linear: {out: 3}, sigmoid]}",
       signal},
  };
}

TEST(SequentialModel, AStateDictFromPythonsSequentialLoadsStrictlyWithItsLogits) {
  if (!torch_available()) GTEST_SKIP() << "Python's torch is not installed (tools/setup.sh installs it)";
  testing::TempDir dir;
  const auto [rc, out] =
      testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/models/sequential_model.py " + dir.file("py") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  for (const Case& c : cases()) {
    std::map<std::string, at::Tensor> io;
    for (const auto& kv : to_tensor_dict(load_pt(dir.file("py/" + c.name + "_io.pt")), c.name)) io[kv.first] = kv.second;
    const ModelDef def = testing::define_model(c.section, c.data);
    std::vector<Block> blocks = testing::build_model(def);
    for (Block& b : blocks) {
      b.module.ptr()->to(at::kDouble);
      b.module.ptr()->eval();
    }
    testing::load_strictly(blocks, load_tensor_dict(dir.file("py/" + c.name + ".pt")), c.name);
    const at::Tensor x = io.at("x"), want = io.at("logits");
    const at::Tensor got = testing::forward(blocks, x);
    ASSERT_EQ(got.sizes(), want.sizes()) << c.name;
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-9) << c.name;
    EXPECT_GT(want.abs().max().item<double>(), 1e-3) << c.name << ": logits not trivially small";
  }
}

TEST(SequentialModel, MistakesNameTheirLine) {
  const DataSpec data = testing::images(3, 8, 8, 10);
  const auto error = [&](const std::string& yaml) {
    return testing::user_error([&] { testing::define_model(yaml, data); });
  };
  // Flow YAML on one line: the column points at the layer.
  std::string e = error("{type: sequential, layers: [conv2d: {out: 4, kernel: 9}, flatten, linear: {out: 10}]}");
  EXPECT_NE(e.find("model.layers[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("conv2d cannot take examples of shape [3, 8, 8]"), std::string::npos) << e;
  e = error("{type: sequential, layers: [flatten, linaer: {out: 10}]}");
  EXPECT_NE(e.find("'linaer' is not a layer pipelab knows"), std::string::npos) << e;
  EXPECT_NE(e.find("use one of: linear"), std::string::npos) << e;
  e = error("{type: sequential, layers: [flatten, linear: {out: 10, bais: false}]}");
  EXPECT_NE(e.find("model.layers[1].linear"), std::string::npos) << e;
  EXPECT_NE(e.find("bais"), std::string::npos) << e;
  e = error("{type: sequential, layers: [flatten, linear]}");
  EXPECT_NE(e.find("linear needs options"), std::string::npos) << e;
  e = error("{type: sequential, layers: [flatten, residual: [linear: {out: 7}], linear: {out: 10}]}");
  EXPECT_NE(e.find("turn [192] into [7]"), std::string::npos) << e;
  e = error("{type: sequential, layers: [flatten, linear: {out: 7}]}");
  EXPECT_NE(e.find("the model ends with examples of shape [7], but the loss takes logits of shape [10]"),
            std::string::npos)
      << e;
  e = error("{type: sequential, layers: [flatten, attention: {heads: 2, dropout: 0.1}, linear: {out: 10}]}");
  EXPECT_NE(e.find("global generator"), std::string::npos) << e;
}

TEST(SequentialModel, OptionsALayerDoesNotUseSizesAndKindsAreRefused) {
  const DataSpec data = testing::images(3, 8, 8, 10);
  DataSpec text;
  text.input_shape = {6};
  text.integer_input = true;
  text.classes = 10;
  const auto error = [](const std::string& layers, const DataSpec& d) {
    return testing::user_error([&] { testing::define_model("{type: sequential, layers: [" + layers + "]}", d); });
  };
  // Every layer kind takes only its own options: one struct per kind, unknown keys named.
  for (const auto& [layers, key] : std::vector<std::pair<std::string, std::string>>{
           {"flatten, attention: {heads: 2, ff: 8}, linear: {out: 10}", "unknown key 'ff' in 'model.layers[1].attention'"},
           {"flatten, attention: {heads: 2, activation: gelu}, linear: {out: 10}", "unknown key 'activation'"},
           {"layer_norm: {groups: 2}, flatten, linear: {out: 10}", "unknown key 'groups' in 'model.layers[0].layer_norm'"},
           {"layer_norm: {momentum: 0.2}, flatten, linear: {out: 10}", "unknown key 'momentum'"},
           {"max_pool2d: {kernel: 2, out: [1, 1]}, flatten, linear: {out: 10}", "unknown key 'out'"},
           {"batch_norm: {groups: 3}, flatten, linear: {out: 10}", "unknown key 'groups' in 'model.layers[0].batch_norm'"},
           {"adaptive_avg_pool2d: {out: [1, 1], kernel: 2}, flatten, linear: {out: 10}", "unknown key 'kernel'"}}) {
    const std::string e = error(layers, data);
    EXPECT_NE(e.find(key), std::string::npos) << layers << "\n" << e;
    EXPECT_NE(e.find("Fix: remove it"), std::string::npos) << e;
  }
  // Sizes and counts are bounded when the file is read, before anything is built.
  std::string e = error("flatten, lstm: {hidden: 8, layers: 1000000}, linear: {out: 10}", data);
  EXPECT_NE(e.find("model.layers[1].lstm.layers: must be a number in [1, 4096], got 1000000"), std::string::npos) << e;
  e = error("flatten, linear: {out: 100000000}, linear: {out: 10}", data);
  EXPECT_NE(e.find("must be a number in [1, 16777216], got 100000000"), std::string::npos) << e;
  // Within the bounds but beyond any machine: 2.56e14 weights (4 PB with their gradients).
  e = error("embedding: {num: 16000000, dim: 16000000}, flatten, linear: {out: 10}", text);
  EXPECT_NE(e.find("model.layers[0].embedding: this embedding has 2.56e+14 weights, which needs"), std::string::npos)
      << e;
  EXPECT_NE(e.find("Fix: make it smaller"), std::string::npos) << e;
  // The length of a list of layers, before any is built.
  std::string many;
  for (int i = 0; i < 16385; ++i) many += "relu, ";
  e = error("flatten, block: [" + many + "relu], linear: {out: 10}", data);
  EXPECT_NE(e.find("model.layers[1].block: 16386 layers, more than the 16384 a list may have"), std::string::npos) << e;
  // Heads and groups that do not divide the width: ours, not LibTorch's internal assert.
  e = error("embedding: {num: 20, dim: 6}, attention: {heads: 4}, flatten, linear: {out: 10}", text);
  EXPECT_NE(e.find("model.layers[1].attention.heads: 4 heads do not divide the width 6"), std::string::npos) << e;
  EXPECT_EQ(e.find("INTERNAL ASSERT"), std::string::npos) << e;
  e = error("group_norm: {groups: 2}, flatten, linear: {out: 10}", data);
  EXPECT_NE(e.find("2 groups do not divide the 3 channels"), std::string::npos) << e;
  // x + f(x) with ids in and values out would add token ids to embeddings.
  e = error("residual: [embedding: {num: 20, dim: 1}, flatten], linear: {out: 10}", text);
  EXPECT_NE(e.find("the residual's layers turn token ids into values"), std::string::npos) << e;
  EXPECT_NE(e.find("Fix: put the embedding before the residual"), std::string::npos) << e;
}

const char* kRun = R"(
model:
  type: sequential
  layers:
    - conv2d: {out: 4, kernel: 3, padding: 1}
    - batch_norm
    - relu
    - block: [max_pool2d: {kernel: 2}, flatten]
    - dropout: {p: 0.2}
    - linear: {out: 4}
dataset:   {type: synthetic, samples: 64, test_samples: 16, shape: [3, 8, 8], classes: 4}
partition: {stages: 2}
scheme:    {type: gpipe, chunks: 2}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
run:       {epochs: 1, batch_size: 16, seed: 4, threads: 1}
)";

TEST(SequentialModel, TrainsAndEveryExecutorAgrees) {
  const TensorDict sequential = testing::train(kRun, {"run.executor=sequential"});
  const TensorDict threaded = testing::train(kRun, {"run.executor={type: threaded, intra_op_threads: 1}"});
  EXPECT_TRUE(testing::identical(sequential, threaded)) << testing::max_difference(sequential, threaded);
  std::vector<std::string> names;
  for (const auto& kv : sequential) names.push_back(kv.first);
  // nn.Sequential's names: entry i's tensors as "i.weight".
  for (const char* name : {"0.weight", "1.weight", "5.weight", "5.bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

}  // namespace
}  // namespace pipelab::sequential_model_test
