// The transformer as a causal language model (`head: lm`) with its output projection tied
// to the word embedding (`tie_embeddings`, docs/schemes.md, "Notation and optimizers"): causality, a tied step
// against autograd on one shared weight, pipelines and replicas against `single`, accuracy
// over every position, and the clear errors.
#include <gtest/gtest.h>

#include <torch/nn/functional/loss.h>

#include "core/io/pt_file.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::language_model_test {
namespace {

constexpr int64_t kWords = 20, kLength = 6;

/// Windows of a counting language: word t + 1 follows word t (mod kWords), from random
/// starts; y is x shifted by one, as datasets/text/lm_windows.h makes them.
void write_counting(const std::string& path, int64_t n, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  const torch::Tensor start = torch::randint(kWords, {n, 1}, torch::kLong);
  const torch::Tensor x = (start + torch::arange(kLength, torch::kLong)).remainder(kWords);
  save_tensor_dict(path, {{"x", x}, {"y", (x + 1).remainder(kWords)}});
}

DataSpec lm_spec() { return testing::word_windows(kWords, kLength); }

const char* kModel = "{type: transformer, head: lm, tie_embeddings: true, num_words: 20, d_model: 8, heads: 2, ff: 8, "
                     "layers: 2, dropout: 0.0}";

/// Training windows (24) and test windows (8) in `dir`; an experiment over them.
std::string lm_experiment(const testing::TempDir& dir) {
  write_counting(dir.file("train.pt"), 24, 1);
  write_counting(dir.file("test.pt"), 8, 2);
  return fmt::format(R"(
model:     {}
dataset:   {{type: tensors, path: {}, test_path: {}, classes: 20}}
partition: {{stages: 2}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: sgd, lr: 0.1}}
run:       {{epochs: 1, batch_size: 24, seed: 3, dtype: float64}}
)",
                     kModel, dir.file("train.pt"), dir.file("test.pt"));
}

/// The model's blocks as the runner builds them under run seed 3, in float64.
std::vector<Block> blocks_as_run() {
  const ModelDef def = testing::define_model(kModel, lm_spec());
  std::vector<Block> blocks;
  for (size_t i = 0; i < def.blocks.size(); ++i) {
    blocks.push_back(build_block(def, i, 3));
    blocks.back().module.ptr()->to(torch::kDouble);
  }
  return blocks;
}

/// Logits through the blocks, the head's projection being the embedding itself: one
/// weight used twice, as Press & Wolf tie it (autograd sums its two gradients).
torch::Tensor shared_weight_logits(std::vector<Block>& blocks, const torch::Tensor& x) {
  Tensors h{x};
  for (size_t i = 0; i + 1 < blocks.size(); ++i) h = call_block(blocks[i], h);
  return torch::linear(h.front(), testing::parameter(blocks, "embed.embeddings.weight"),
                       testing::parameter(blocks, "head.output.bias"));
}

at::Tensor named(const TensorDict& d, const std::string& name) {
  for (const auto& [key, t] : d) {
    if (key == name) return t;
  }
  ADD_FAILURE() << "no " << name;
  return {};
}

TEST(LanguageModel, NoPositionSeesALaterWord) {
  std::vector<Block> blocks = testing::build_model(testing::define_model(
      "{type: transformer, head: lm, num_words: 20, d_model: 8, heads: 2, ff: 8, layers: 2, dropout: 0.0}", lm_spec()));
  const torch::Tensor words = torch::tensor({{3, 4, 5, 6, 7, 8}, {9, 1, 2, 11, 12, 13}}, torch::kLong);
  torch::Tensor changed = words.clone();
  changed.narrow(1, 4, 2).fill_(0);
  const torch::Tensor a = testing::forward(blocks, words), b = testing::forward(blocks, changed);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, kLength, kWords}));
  EXPECT_TRUE(torch::allclose(a.narrow(1, 0, 4), b.narrow(1, 0, 4), 1e-6, 1e-6));  // positions 0-3 cannot see 4, 5
  EXPECT_FALSE(torch::allclose(a.narrow(1, 4, 1), b.narrow(1, 4, 1)));             // position 4 reads itself
}

TEST(LanguageModel, TheTieIsTheEmbeddingAndTheHeadsProjection) {
  const ModelDef def = testing::define_model(kModel, lm_spec());
  ASSERT_EQ(def.ties.size(), 1u);
  EXPECT_EQ(def.ties[0].first, "embed.embeddings.weight");
  EXPECT_EQ(def.ties[0].second, "head.output.weight");
  EXPECT_TRUE(testing::define_model("{type: transformer, head: lm, num_words: 20}", lm_spec()).ties.empty());
}

TEST(LanguageModel, EmbeddingStdScalesTheSameDraw) {
  const auto embedding = [](const std::string& model) {
    const ModelDef def = testing::define_model(model, lm_spec());
    return testing::parameter({build_block(def, 0, 3)}, "embed.embeddings.weight");
  };
  const torch::Tensor reference = embedding("{type: transformer, head: lm, num_words: 20}");
  const torch::Tensor gpt = embedding("{type: transformer, head: lm, num_words: 20, embedding_std: 0.02}");
  EXPECT_TRUE(torch::equal(gpt, reference * 0.02));
}

TEST(LanguageModel, ATiedStepIsTheStepOfOneSharedWeight) {
  // The oracle: autograd through the model with one embedding matrix used twice; one SGD
  // step on the whole mini-batch. The run's two copies must both land on that weight, on
  // one stage, on two pipeline stages, and on two replicas of them.
  testing::TempDir dir;
  const std::string yaml = lm_experiment(dir);
  std::vector<Block> blocks = blocks_as_run();
  const TensorDict train = load_tensor_dict(dir.file("train.pt"));
  const torch::Tensor logits = shared_weight_logits(blocks, named(train, "x"));
  torch::nn::functional::cross_entropy(logits.flatten(0, 1), named(train, "y").flatten()).backward();
  TensorDict expected;
  for (const Block& b : blocks) {
    for (const auto& p : b.module.ptr()->named_parameters()) {
      const torch::Tensor g = p.value().grad().defined() ? p.value().grad() : torch::zeros_like(p.value());
      expected.emplace_back(b.name + "." + p.key(), (p.value() - 0.1 * g).detach());
    }
  }
  const torch::Tensor embedding = named(expected, "embed.embeddings.weight");
  for (auto& [key, t] : expected) {
    if (key == "head.output.weight") t = embedding;  // the second copy of the one weight
  }
  for (const std::vector<std::string>& o : std::vector<std::vector<std::string>>{
           {"scheme={type: single}"}, {}, {"scheme={type: pipedream_flush, chunks: 2}"}, {"partition.replicas=2"}}) {
    SCOPED_TRACE(o.empty() ? "gpipe" : o.front());
    const TensorDict got = testing::train(yaml, o);
    EXPECT_LT(testing::max_difference(got, expected), 1e-10);
  }
  // The fidelity flag of PipeDream-2BW's code (its skipped tied-weight all-reduce,
  // docs/schemes.md, "Quirks"): each copy steps alone, so they part.
  const TensorDict apart = testing::train(yaml, {"optimizer.tied_gradients=separate"});
  EXPECT_GT((named(apart, "embed.embeddings.weight") - named(apart, "head.output.weight")).abs().max().item<double>(),
            1e-6);
}

TEST(LanguageModel, PipelinesWithTheTieEqualSingle) {
  testing::TempDir dir;
  const std::string yaml = lm_experiment(dir);
  const std::vector<std::string> common{"optimizer={type: adam, lr: 0.01}", "run.batch_size=8", "run.epochs=2"};
  std::vector<std::string> single = common;
  single.push_back("scheme={type: single}");
  const TensorDict reference = testing::train(yaml, single);
  EXPECT_EQ(testing::max_difference({{"w", named(reference, "embed.embeddings.weight")}},
                                    {{"w", named(reference, "head.output.weight")}}),
            0.0);
  // Interleaved and V at 4 stages: the embedding and the head are stages 0 and 3, both on
  // device 0, which joins the tie's collective once for the two.
  for (const std::vector<std::string>& o : std::vector<std::vector<std::string>>{
           {"scheme={type: gpipe, chunks: 2}"},
           {"scheme={type: pipedream_flush, chunks: 4}"},
           {"scheme={type: zb_h1, chunks: 2}"},
           {"scheme={type: interleaved_1f1b, chunks: 2, virtual_stages: 2}", "partition.stages=4"},
           {"scheme={type: zbv, chunks: 2}", "partition.stages=4", "run.executor={type: threaded, intra_op_threads: 1}"},
       }) {
    SCOPED_TRACE(o.front());
    std::vector<std::string> overrides = common;
    overrides.insert(overrides.end(), o.begin(), o.end());
    EXPECT_LT(testing::max_difference(testing::train(yaml, overrides), reference), 1e-10);
  }
  std::vector<std::string> untied = single;
  untied.push_back("model.tie_embeddings=false");
  EXPECT_GT(testing::max_difference(testing::train(yaml, untied), reference), 1e-3);
}

TEST(LanguageModel, AccuracyIsTheShareOfPositionsPredicted) {
  // The run's test accuracy against the hits of its final weights, counted here by hand.
  testing::TempDir dir;
  Experiment e = testing::experiment(lm_experiment(dir), dir.file("run"),
                                     {"optimizer={type: adam, lr: 0.01}", "run.batch_size=8", "run.epochs=2"});
  RunnerOptions options;
  options.quiet = true;
  const RunSummary summary = Runner(e, options).run();
  ASSERT_EQ(summary.history.size(), 2u);
  std::vector<Block> blocks = blocks_as_run();
  const TensorDict trained = load_tensor_dict(dir.file("run/checkpoints/final.pt"));
  const torch::NoGradGuard no_grad;
  for (Block& b : blocks) {
    for (auto& p : b.module.ptr()->named_parameters()) p.value().copy_(named(trained, b.name + "." + p.key()));
  }
  const TensorDict test = load_tensor_dict(dir.file("test.pt"));
  const int64_t hits = shared_weight_logits(blocks, named(test, "x")).argmax(-1).eq(named(test, "y")).sum().item<int64_t>();
  ASSERT_GT(hits, 0);  // else any denominator would do
  EXPECT_NEAR(summary.history.back().test_acc, 100.0 * static_cast<double>(hits) / (8.0 * kLength), 1e-9);
}

TEST(LanguageModel, MismatchesAreClearErrors) {
  DataSpec labels = lm_spec();
  labels.target_shape.clear();
  labels.classes = 2;
  const auto error = [](const std::string& model, const DataSpec& data) {
    return testing::user_error([&] { testing::define_model(model, data); });
  };
  EXPECT_NE(error("{type: transformer, head: lm, num_words: 20}", labels).find("one label per example"), std::string::npos);
  EXPECT_NE(error("{type: transformer, num_words: 20}", lm_spec()).find("set head: lm"), std::string::npos);
  EXPECT_NE(error("{type: transformer, tie_embeddings: true}", labels).find("set head: lm"), std::string::npos);
  EXPECT_NE(error("{type: transformer, head: lm, tie_embeddings: true, num_words: 30}", lm_spec())
                .find("set model.num_words to 20"),
            std::string::npos);
  EXPECT_NE(error("{type: transformer, head: lm, padding_mask: true}", lm_spec()).find("no padding"), std::string::npos);
  // Interlocking's auxiliary heads classify whole examples.
  testing::TempDir dir;
  const std::string interlocking = testing::user_error(
      [&] { testing::train(lm_experiment(dir), {"scheme={type: interlocking, mode: pairwise}"}); });
  EXPECT_NE(interlocking.find("one class per example"), std::string::npos) << interlocking;
  // A test file whose targets have another shape.
  save_tensor_dict(dir.file("short.pt"), {{"x", torch::zeros({4, kLength}, torch::kLong)},
                                          {"y", torch::zeros({4, kLength - 1}, torch::kLong)}});
  const std::string targets = testing::user_error([&] {
    testing::train(lm_experiment(dir), {fmt::format("dataset.test_path={}", dir.file("short.pt"))});
  });
  EXPECT_NE(targets.find("test targets have shape [5], training targets [6]"), std::string::npos) << targets;
}

}  // namespace
}  // namespace pipelab::language_model_test
