// `roberta`: a small random RobertaForSequenceClassification from `transformers`
// (tests/models/roberta_model.py, run when Python's transformers is installed) loads through
// `init.names: huggingface`, from its torch.save file and from its safetensors file, strictly,
// and gives Hugging Face's eval-mode logits on padded token ids (float64).
#include <gtest/gtest.h>

#include <map>

#include "core/io/pt_file.h"
#include "core/io/safetensors.h"
#include "core/model/tensor_names.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::roberta_model_test {
namespace {

bool transformers_available() {
  static const bool available = testing::shell("python3 -c 'import transformers' >/dev/null 2>&1").first == 0;
  return available;
}

TEST(RobertaModel, HuggingFacesCheckpointGivesItsLogits) {
  if (!transformers_available()) {
    GTEST_SKIP() << "Python's transformers is not installed (tools/setup.sh --all installs it)";
  }
  testing::TempDir dir;
  const auto [rc, out] =
      testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/models/roberta_model.py " + dir.file("hf") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  std::map<std::string, at::Tensor> io;
  for (const auto& kv : to_tensor_dict(load_pt(dir.file("hf/roberta_io.pt")), "io")) io[kv.first] = kv.second;
  DataSpec data;
  data.input_shape = {10};
  data.integer_input = true;
  data.classes = 3;
  const ModelDef def = testing::define_model(
      "{type: roberta, vocab: 60, hidden: 16, layers: 2, heads: 2, intermediate: 32, max_positions: 40}", data);
  for (const char* file : {"hf/roberta.pt", "hf/roberta.safetensors"}) {
    std::vector<Block> blocks = testing::build_model(def);
    for (Block& b : blocks) {
      b.module.ptr()->to(at::kDouble);
      b.module.ptr()->eval();
    }
    std::vector<std::string> dropped;
    const std::string path = dir.file(file);
    testing::load_strictly(blocks, rename_tensors(load_weights(path), def.published_names.at("huggingface"), path, &dropped),
                           file);
    const at::Tensor got = testing::forward(blocks, io.at("x"));
    ASSERT_EQ(got.sizes(), io.at("logits").sizes()) << file;
    EXPECT_LT((got - io.at("logits")).abs().max().item<double>(), 1e-10) << file;
  }
  EXPECT_GT(io.at("logits").abs().max().item<double>(), 1e-3);
}

TEST(RobertaModel, RefusesWhatItCannotRead) {
  const std::string e = testing::user_error(
      [] { testing::define_model("{type: roberta, hidden: 16, heads: 3}", testing::images(3, 8, 8, 2)); });
  EXPECT_NE(e.find("3 heads do not divide the hidden size 16"), std::string::npos) << e;
  DataSpec text;
  text.input_shape = {600};
  text.integer_input = true;
  text.classes = 2;
  const std::string longer = testing::user_error([&] { testing::define_model("{type: roberta}", text); });
  EXPECT_NE(longer.find("sequences of 600 tokens need 602 positions"), std::string::npos) << longer;
}

}  // namespace
}  // namespace pipelab::roberta_model_test
