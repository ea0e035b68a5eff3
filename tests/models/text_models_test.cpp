// transformer and residual_lstm: parameter counts by hand, shapes on int64 word ids, the
// residual quirk, SpecTrain's splits, initialisation, bad input, and a short training run
// on two pipeline stages (int64 ids enter stage 0).
#include <gtest/gtest.h>

#include <cmath>

#include "core/io/pt_file.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"

namespace pipelab::text_models_test {
namespace {

using V = std::vector<int>;
using Shape = std::vector<int64_t>;

/// IMDB as SpecTrain uses it: ids [200] from a 10000-word vocabulary, 2 classes.
DataSpec imdb_spec(int64_t maxlen = 200) {
  DataSpec d;
  d.input_shape = {maxlen};
  d.classes = 2;
  d.integer_input = true;
  return d;
}

torch::Tensor ids(int64_t n, int64_t maxlen, int64_t vocab = 10000) { return torch::randint(vocab, {n, maxlen}, torch::kLong); }

TEST(ZooText, TransformerPaddingMaskIgnoresPaddedPositions) {
  // With padding_mask: true, embed writes (x, mask); no layer output at a word, and no
  // logit, depends on what sits at a padded position.
  const ModelDef def = testing::define_model("{type: transformer, d_model: 16, layers: 1, dropout: 0.0, padding_mask: true}",
                                             imdb_spec(6));
  EXPECT_EQ(dataflow(def, "transformer").live[1], (std::vector<std::string>{"x", "mask"}));
  std::vector<Block> blocks = testing::build_model(def);
  const torch::NoGradGuard no_grad;
  const torch::Tensor words = torch::tensor({{5, 7, 9, 0, 0, 0}, {3, 4, 0, 0, 0, 0}}, torch::kLong);
  const Tensors embedded = call_block(blocks[0], {words});
  ASSERT_EQ(embedded.size(), 2u);
  EXPECT_TRUE(embedded[1].equal(words.ne(0)));
  torch::Tensor noisy = embedded[0].clone();
  noisy.masked_scatter_(embedded[1].logical_not().unsqueeze(-1).expand_as(noisy), torch::randn_like(noisy) * 100);
  const torch::Tensor a = call_block(blocks[1], {embedded[0], embedded[1]})[0];
  const torch::Tensor b = call_block(blocks[1], {noisy, embedded[1]})[0];
  const torch::Tensor at_words = embedded[1].unsqueeze(-1).expand_as(a);
  EXPECT_TRUE(torch::allclose(a.masked_select(at_words), b.masked_select(at_words), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(a, b));  // the padded positions themselves did change
  // The head averages over the words only: the first example's mean of three positions.
  const torch::Tensor logits = call_block(blocks[2], {a, embedded[1]})[0];
  const torch::Tensor by_hand = call_block(blocks[2], {a.narrow(0, 0, 1).narrow(1, 0, 3),
                                                       torch::ones({1, 3}, torch::kBool)})[0];
  EXPECT_TRUE(torch::allclose(logits.narrow(0, 0, 1), by_hand, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(logits, call_block(blocks[2], {b, embedded[1]})[0], 1e-5, 1e-5));
}

TEST(ZooText, TransformerCountAndShapes) {
  // embed: embedding 10000*128 = 1,280,000 + emb_ff 128*128+128 = 16,512 + position
  //   linear 200*128+128 = 25,728 -> 1,322,240
  // layer: q, k, v, joint 4*(128*128+128) = 66,048 + two LayerNorms 2*(128+128) = 512 +
  //   ff 2*(128*128+128) = 33,024 -> 99,584; three layers 298,752
  // head: 128*2+2 = 258.  Total 1,621,250.
  const ModelDef def = testing::define_model("{type: transformer}", imdb_spec());
  EXPECT_EQ(testing::block_names(def), (std::vector<std::string>{"embed", "layer1", "layer2", "layer3", "head"}));
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(count_parameters(*blocks[0].module.ptr()), 1322240);
  EXPECT_EQ(count_parameters(*blocks[1].module.ptr()), 99584);
  EXPECT_EQ(count_parameters(*blocks[4].module.ptr()), 258);
  EXPECT_EQ(testing::parameter_count(blocks), 1621250);
  EXPECT_EQ(testing::forward(blocks, ids(3, 200)).sizes(), (Shape{3, 2}));
  EXPECT_EQ(blocks[0].module.forward(ids(3, 200)).sizes(), (Shape{3, 200, 128}));
  EXPECT_EQ(testing::parameter(blocks, "embed.embeddings.weight").sizes(), (Shape{10000, 128}));
  EXPECT_EQ(testing::parameter(blocks, "embed.pos.weight").sizes(), (Shape{128, 200}));
  EXPECT_TRUE(testing::parameter(blocks, "layer2.attention.q_linear.weight").defined());
  EXPECT_TRUE(testing::parameter(blocks, "layer3.ff_norm.weight").defined());
  EXPECT_TRUE(testing::parameter(blocks, "head.output.bias").defined());
}

TEST(ZooText, ResidualLstmCountAndShapes) {
  // embed: 10000*128 = 1,280,000
  // block: LSTM 4*128*(128+128) + 2*4*128 = 132,096 + projection 128*128+128 = 16,512
  //   -> 148,608; four blocks 594,432
  // head: 258.  Total 1,874,690.
  const ModelDef def = testing::define_model("{type: residual_lstm}", imdb_spec());
  EXPECT_EQ(testing::block_names(def),
            (std::vector<std::string>{"embed", "lstm1", "lstm2", "lstm3", "lstm4", "head"}));
  std::vector<Block> blocks = testing::build_model(def);
  EXPECT_EQ(count_parameters(*blocks[1].module.ptr()), 148608);
  EXPECT_EQ(testing::parameter_count(blocks), 1874690);
  EXPECT_EQ(testing::forward(blocks, ids(2, 200)).sizes(), (Shape{2, 2}));
  EXPECT_EQ(testing::parameter(blocks, "lstm1.LSTM.weight_ih_l0").sizes(), (Shape{512, 128}));
  EXPECT_EQ(testing::parameter(blocks, "embed.weight").sizes(), (Shape{10000, 128}));
  // Options change the widths: 100*16 + 2 x (4*32*(16+32) + 2*4*32 + 32*16+16) + 16*3+3.
  const ModelDef small =
      testing::define_model("{type: residual_lstm, num_words: 100, d_model: 16, hidden: 32, layers: 2}", [] {
        DataSpec d = imdb_spec(12);
        d.classes = 3;
        return d;
      }());
  std::vector<Block> sb = testing::build_model(small);
  EXPECT_EQ(testing::parameter_count(sb), 1600 + 2 * (6144 + 256 + 528) + 51);
  EXPECT_EQ(testing::forward(sb, ids(4, 12, 100)).sizes(), (Shape{4, 3}));
  EXPECT_TRUE(small.named_balances.empty());  // SpecTrain's splits are for its 4 blocks only
}

TEST(ZooText, ResidualQuirkChangesOutputsNotParameters) {
  const ModelDef reference = testing::define_model("{type: transformer, dropout: 0}", imdb_spec(20));
  const ModelDef standard = testing::define_model("{type: transformer, dropout: 0, ff_residual: attention}", imdb_spec(20));
  Block a = build_block(reference, 1, 0), b = build_block(standard, 1, 0);
  EXPECT_EQ(count_parameters(*a.module.ptr()), count_parameters(*b.module.ptr()));
  // Same seed, same weights: only the second residual differs.
  EXPECT_TRUE(torch::equal(a.module.ptr()->named_parameters()["ff.0.weight"],
                           b.module.ptr()->named_parameters()["ff.0.weight"]));
  const torch::Tensor x = torch::randn({2, 20, 128});
  torch::NoGradGuard no_grad;
  const torch::Tensor ya = a.module.forward(x), yb = b.module.forward(x);
  EXPECT_GT((ya - yb).abs().max().item<double>(), 1e-3);
  // Either way the output is layer-normalised over the feature axis (LayerNorm starts at 1, 0).
  EXPECT_NEAR(ya.mean(-1).abs().max().item<double>(), 0.0, 1e-5);
  EXPECT_NEAR(yb.pow(2).mean().item<double>(), 1.0, 1e-3);
}

TEST(ZooText, SpectrainSplits) {
  // docs/schemes.md, "SpecTrain: models and module-to-stage maps": modules [0,0,1,1,1] and [0,1,2,3,3]; SpecTrain's
  // stage3 holds the last layer and the head, and the LSTM's stage0 the embedding and the first block.
  const ModelDef t = testing::define_model("{type: transformer}", imdb_spec());
  EXPECT_EQ(t.named_balances.at("spectrain_2"), (V{2, 3}));
  EXPECT_EQ(t.named_balances.at("spectrain_4"), (V{1, 1, 1, 2}));
  EXPECT_EQ(testing::stage_starts(t, t.named_balances.at("spectrain_2")), (std::vector<std::string>{"embed", "layer2"}));
  const ModelDef l = testing::define_model("{type: residual_lstm}", imdb_spec());
  EXPECT_EQ(l.named_balances.at("spectrain_2"), (V{3, 3}));
  EXPECT_EQ(l.named_balances.at("spectrain_4"), (V{2, 1, 1, 2}));
  EXPECT_EQ(testing::stage_starts(l, l.named_balances.at("spectrain_4")),
            (std::vector<std::string>{"embed", "lstm2", "lstm3", "lstm4"}));
  for (const ModelDef* def : {&t, &l}) {
    for (const auto& [name, balance] : def->named_balances) {
      EXPECT_EQ(testing::total(balance), static_cast<int>(def->blocks.size())) << name;
    }
  }
}

TEST(ZooText, InitialisedAsSpecTrain) {
  const ModelDef def = testing::define_model("{type: transformer}", imdb_spec());
  const Block embed = build_block(def, 0, 0), layer = build_block(def, 1, 0);
  auto ep = embed.module.ptr()->named_parameters(), lp = layer.module.ptr()->named_parameters();
  EXPECT_NEAR(ep["embeddings.weight"].std().item<double>(), 1.0, 0.01);     // nn.Embedding: N(0, 1)
  EXPECT_NEAR(lp["attention.k_linear.weight"].std().item<double>(), 0.01, 0.0005);  // every linear N(0, 0.01)
  EXPECT_EQ(lp["attention.k_linear.bias"].abs().max().item<double>(), 0.0);
  EXPECT_EQ(lp["attention_norm.weight"].min().item<double>(), 1.0);
  const ModelDef lstm = testing::define_model("{type: residual_lstm}", imdb_spec());
  auto bp = build_block(lstm, 1, 0).module.ptr()->named_parameters();
  // PyTorch's LSTM default: U(-1/sqrt(128), 1/sqrt(128)), std = 0.0884 / sqrt(3) = 0.0510.
  EXPECT_LE(bp["LSTM.weight_hh_l0"].abs().max().item<double>(), 1 / std::sqrt(128.0));
  EXPECT_NEAR(bp["LSTM.weight_hh_l0"].std().item<double>(), 0.0510, 0.001);
  EXPECT_NEAR(bp["projection_matrix.weight"].std().item<double>(), 0.01, 0.0005);
}

TEST(ZooText, BadInput) {
  const std::string images =
      testing::user_error([] { testing::define_model("{type: transformer}", testing::images(3, 32, 32, 10)); });
  EXPECT_NE(images.find("needs word ids"), std::string::npos) << images;
  const std::string heads = testing::user_error([] { testing::define_model("{type: transformer, heads: 3}", imdb_spec()); });
  EXPECT_NE(heads.find("3 heads do not divide d_model = 128"), std::string::npos) << heads;
  const ModelDef def = testing::define_model("{type: residual_lstm, num_words: 50}", imdb_spec(8));
  Block embed = build_block(def, 0, 0);
  const std::string vocab = testing::user_error([&] { embed.module.forward(torch::full({1, 8}, 50, torch::kLong)); });
  EXPECT_NE(vocab.find("a word id is 50, outside the embedding's vocabulary [0, 50)"), std::string::npos) << vocab;
}

/// Word ids 0..49; the label says whether most of them are below 25 (a bag-of-words task
/// that mean pooling can learn).
void write_token_task(const std::string& path) {
  torch::manual_seed(7);
  const torch::Tensor x = torch::randint(50, {256, 12}, torch::kLong);
  const torch::Tensor y = (x.lt(25).sum(1) > 6).to(torch::kLong);
  save_tensor_dict(path, {{"x", x}, {"y", y}});
}

TEST(ZooText, BothModelsTrainOnTwoPipelineStages) {
  testing::TempDir dir;
  write_token_task(dir.file("tokens.pt"));
  const std::vector<std::pair<std::string, std::string>> models{
      {"transformer", "{type: transformer, num_words: 50, d_model: 32, heads: 4, ff: 32, layers: 2, dropout: 0.1}"},
      {"residual_lstm", "{type: residual_lstm, num_words: 50, d_model: 32, hidden: 32, layers: 2}"}};
  for (const auto& [name, model] : models) {
    const std::string yaml = fmt::format(R"(
model:     {}
dataset:   {{type: tensors, path: {}, test_fraction: 0.25}}
partition: {{stages: 2, balance: [2, 2]}}
scheme:    {{type: gpipe, chunks: 2}}
optimizer: {{type: adam, lr: 0.01}}
run:       {{epochs: 6, batch_size: 32, seed: 0, threads: 1}}
)",
                                         model, dir.file("tokens.pt"));
    Experiment e = testing::experiment(yaml, dir.file(name));
    RunnerOptions options;
    options.quiet = true;
    Runner runner(e, options);
    const RunSummary summary = runner.run();
    ASSERT_EQ(summary.status, "finished") << model;
    ASSERT_EQ(summary.history.size(), 6u);
    EXPECT_LT(summary.history.back().train_loss, 0.8 * summary.history.front().train_loss) << model;
  }
}

}  // namespace
}  // namespace pipelab::text_models_test
