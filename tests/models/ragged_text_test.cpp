// Ragged text (datasets/text/ragged_text.h, core/nn/document_layout.h): pieces cut at document
// ends, padded or packed rows with their layout (hand-computed); positions and attention kept
// within each document; a padded batch's gradient is its examples' one by one and a packed
// row's logits are each document's alone (llama and the transformer, float64); and every
// schedule trains on micro-batches of differing lengths to single's weights, threaded and
// launched as one process does, bit for bit.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <numeric>

#include <fmt/ranges.h>

#include "core/feed/feeds.h"
#include "core/nn/document_layout.h"
#include "core/processes/process_group.h"
#include "datasets/text/ragged_text.h"
#include "tests/models/zoo.h"
#include "tests/support/helpers.h"
#include "tests/tools/launch_support.h"

namespace pipelab::ragged_text_test {
namespace {

using Ids = std::vector<std::vector<int64_t>>;

at::Tensor ids(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong); }
at::Tensor rows(const Ids& v) {
  std::vector<at::Tensor> out;
  for (const auto& r : v) out.push_back(ids(r));
  return torch::stack(out);
}

TEST(RaggedText, DocumentsAreCutIntoPiecesAtTheirEnds) {
  // Pieces of at most 3 inputs (4 ids), neighbours sharing one id; a 1-id document predicts nothing.
  const Ids pieces = document_pieces({{1, 2, 3, 4, 5, 6, 7}, {9}, {8, 9}}, 3);
  EXPECT_EQ(pieces, (Ids{{1, 2, 3, 4}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(document_pieces({{1, 2, 3, 4, 5}}, 3), (Ids{{1, 2, 3, 4}, {4, 5}}));
}

TEST(RaggedText, PaddedBatchesAreTheirLongestPiecesWide) {
  const RaggedText text({{1, 2, 3}, {4, 5, 6, 7, 8}, {9, 10}}, 6, Collate::Pad);
  EXPECT_EQ(text.size(), 3);
  const Batch b = text.get({2, 0}, 0);
  EXPECT_TRUE(torch::equal(b.x, rows({{9, 0}, {1, 2}})));
  EXPECT_TRUE(torch::equal(b.y, rows({{10, kIgnoredTarget}, {2, 3}})));
  EXPECT_TRUE(torch::equal(b.documents, rows({{0, -1}, {0, 0}})));
  EXPECT_EQ(text.get({1}, 0).x.size(1), 4);
}

TEST(RaggedText, PackedRowsHoldWholePiecesBestFit) {
  // Inputs of 2, 3, 4 and 1 tokens in rows of 5: [2 + 3], [4 + 1].
  const RaggedText text({{1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11, 12}, {13, 14}}, 5, Collate::Pack);
  ASSERT_EQ(text.size(), 2);
  const Batch b = text.get({0, 1}, 0);
  EXPECT_TRUE(torch::equal(b.x, rows({{1, 2, 4, 5, 6}, {8, 9, 10, 11, 13}})));
  EXPECT_TRUE(torch::equal(b.y, rows({{2, 3, 5, 6, 7}, {9, 10, 11, 12, 14}})));
  EXPECT_TRUE(torch::equal(b.documents, rows({{0, 0, 1, 1, 1}, {0, 0, 0, 0, 1}})));
  // A piece that does not fit starts a row; the rest of the row is padding.
  const RaggedText loose({{1, 2, 3, 4}, {5, 6, 7}}, 4, Collate::Pack);
  EXPECT_TRUE(torch::equal(loose.get({0, 1}, 0).documents, rows({{0, 0, 0}, {0, 0, -1}})));
  const RaggedText tight({{1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13}, {14, 15, 16, 17}, {18, 19, 20, 21, 22}}, 10,
                         Collate::Pack);
  // Each piece into the row it fills most tightly. Inputs 6, 5, 3, 4 in rows of 10: 6 opens
  // row 0 (4 left), 5 opens row 1 (5 left), 3 fits row 0 more tightly than row 1, and 4 goes
  // into row 1 (filling rows in turn would have opened a third row).
  const std::vector<std::pair<int64_t, int64_t>> placed{{0, 0}, {1, 0}, {0, 6}, {1, 5}};
  EXPECT_EQ(tight.placement(), placed);
}

TEST(RaggedText, EachReplicasShareGoesLongestFirstIntoItsMicroBatches) {
  // Rows of 2, 5, 3 | 1, 4 tokens in two shares: each share sorted, no row changes share.
  const RaggedText text({{1, 2, 3}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4}, {1, 2}, {1, 2, 3, 4, 5}}, 6, Collate::Pad);
  Batch b = text.get({0, 1, 2, 3, 4}, 0);
  b.ids = ids({10, 11, 12, 13, 14});
  const Batch sorted = longest_first(b, {3, 2});
  EXPECT_TRUE(torch::equal(sorted.ids, ids({11, 12, 10, 14, 13})));
  EXPECT_TRUE(torch::equal(sorted.documents.ge(0).sum(1), ids({5, 3, 2, 4, 1})));
  EXPECT_TRUE(torch::equal(sorted.x[0], b.x[1]));
}

TEST(DocumentLayout, PositionsRestartAndQueriesSeeTheirOwnDocumentsEarlierTokens) {
  const at::Tensor documents = rows({{0, 0, 1, 1, 1, -1}});
  EXPECT_FALSE(nn::document_positions(0, 6).defined());  // no scope: fixed windows
  const nn::DocumentScope scope(documents);
  EXPECT_TRUE(torch::equal(nn::document_positions(0, 6), rows({{0, 1, 0, 1, 2, 0}})));
  EXPECT_TRUE(torch::equal(nn::document_positions(3, 2), rows({{1, 2}})));
  // Queries 3 and 4 (a segment at offset 3) over keys 0..4: document 1 is keys 2..4.
  const at::Tensor blocked = nn::blocked_keys(3, 2);
  ASSERT_EQ(blocked.sizes(), (c10::IntArrayRef{1, 1, 2, 5}));
  const at::Tensor expected = torch::tensor({1, 1, 0, 0, 1, 1, 1, 0, 0, 0}, torch::kBool).view({1, 1, 2, 5});
  EXPECT_TRUE(torch::equal(blocked, expected));
  // Padding sees itself (no softmax over nothing).
  EXPECT_FALSE(nn::blocked_keys(0, 6)[0][0][5][5].item<bool>());
}

// --- The models ----------------------------------------------------------------------------

constexpr int64_t kVocab = 16, kLength = 10;

const char* const kLlama = "{type: llama, vocab: 16, hidden: 16, intermediate: 24, layers: 2, heads: 4, kv_heads: 2}";
const char* const kTransformer =
    "{type: transformer, head: lm, num_words: 16, d_model: 8, heads: 2, ff: 8, layers: 2, dropout: 0.0}";

DataSpec ragged_spec() {
  DataSpec data = testing::word_windows(kVocab, kLength);
  data.documents = true;
  return data;
}

std::vector<Block> float64_model(const std::string& section) {
  torch::manual_seed(5);
  std::vector<Block> blocks = testing::build_model(testing::define_model(section, ragged_spec()));
  for (Block& b : blocks) b.module.ptr()->to(torch::kDouble);
  return blocks;
}

/// Documents of 3, 10, 6 and 2 words and their next words.
Ids documents() {
  torch::manual_seed(11);
  Ids out;
  for (const int64_t n : {4, 11, 7, 3}) {
    const at::Tensor d = torch::randint(kVocab, {n}, torch::kLong);
    out.emplace_back(d.data_ptr<int64_t>(), d.data_ptr<int64_t>() + n);
  }
  return out;
}

at::Tensor logits_of(std::vector<Block>& blocks, const at::Tensor& x) {
  LiveSet live(x);
  for (Block& b : blocks) live.run(b);
  return live.get("x");
}

std::vector<at::Tensor> gradients(std::vector<Block>& blocks) {
  std::vector<at::Tensor> out;
  for (Block& b : blocks) {
    for (const at::Tensor& p : b.module.ptr()->parameters()) {
      out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
      p.mutable_grad() = at::Tensor();
    }
  }
  return out;
}

/// The mean loss over the predicted targets of one batch of `text`, and its gradients.
std::vector<at::Tensor> batch_gradients(std::vector<Block>& blocks, const RaggedText& text) {
  std::vector<int64_t> all(static_cast<size_t>(text.size()));
  std::iota(all.begin(), all.end(), 0);
  const Batch b = text.get(all, 0);
  const nn::DocumentScope scope(b.documents);
  CrossEntropyLoss().compute(logits_of(blocks, b.x), b.y).backward();
  return gradients(blocks);
}

/// The same from each document alone (no padding, no layout): summed losses over all tokens.
std::vector<at::Tensor> one_by_one(std::vector<Block>& blocks, const Ids& docs) {
  double tokens = 0;
  for (const auto& d : docs) tokens += static_cast<double>(d.size() - 1);
  for (const auto& d : docs) {
    const at::Tensor x = ids(d).narrow(0, 0, static_cast<int64_t>(d.size()) - 1).unsqueeze(0);
    const at::Tensor y = ids(d).narrow(0, 1, static_cast<int64_t>(d.size()) - 1).unsqueeze(0);
    const at::Tensor logits = logits_of(blocks, x);
    (torch::cross_entropy_loss(logits.flatten(0, 1), y.flatten(), {}, at::Reduction::Sum) / tokens).backward();
  }
  return gradients(blocks);
}

double largest_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

class RaggedModels : public ::testing::TestWithParam<const char*> {};

TEST_P(RaggedModels, APaddedBatchsGradientIsItsExamplesOneByOne) {
  std::vector<Block> blocks = float64_model(GetParam());
  const Ids docs = documents();
  const std::vector<at::Tensor> alone = one_by_one(blocks, docs);
  const std::vector<at::Tensor> padded = batch_gradients(blocks, RaggedText(docs, kLength, Collate::Pad));
  const double error = largest_difference(alone, padded);
  std::printf("[ figure ] %s: padded batch against its examples one by one: largest gradient difference %.3g\n",
              GetParam(), error);
  EXPECT_LT(error, 1e-12);
  EXPECT_GT(alone.front().abs().max().item<double>(), 1e-4);
}

TEST_P(RaggedModels, APackedRowsLogitsAreEachDocumentsAlone) {
  std::vector<Block> blocks = float64_model(GetParam());
  for (Block& b : blocks) b.module.ptr()->eval();
  const Ids docs = documents();
  const RaggedText packed(docs, kLength, Collate::Pack);
  ASSERT_LT(packed.size(), static_cast<int64_t>(docs.size())) << "some row holds two documents";
  const Batch b = packed.get({0, 1, 2}, 0);
  at::Tensor logits;
  {
    const nn::DocumentScope scope(b.documents);
    logits = logits_of(blocks, b.x);
  }
  // Each document's tokens in the packed rows against the document's own forward.
  // Inputs of 3, 10, 6 and 2 tokens in rows of 10, best fit: [3 + 6], [10], [2].
  const std::vector<std::pair<int64_t, int64_t>> expected{{0, 0}, {1, 0}, {0, 3}, {2, 0}};
  EXPECT_EQ(packed.placement(), expected);
  double worst = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto n = static_cast<int64_t>(docs[i].size()) - 1;
    const auto [row, column] = packed.placement()[i];
    const at::Tensor alone = logits_of(blocks, ids(docs[i]).narrow(0, 0, n).unsqueeze(0))[0];
    worst = std::max(worst, (logits[row].narrow(0, column, n) - alone).abs().max().item<double>());
  }
  EXPECT_LT(worst, 1e-12);
  // Packed gradients, too, are the documents' one by one.
  EXPECT_LT(largest_difference(one_by_one(blocks, docs), batch_gradients(blocks, packed)), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Models, RaggedModels, ::testing::Values(kLlama, kTransformer),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.index == 0 ? "llama" : "transformer");
                         });

// --- Runs ----------------------------------------------------------------------------------

/// 32 synthetic documents of 2 to 10 words, 2 steps of 16, float64: micro-batches of one step
/// differ in length.
std::string experiment(const std::string& model, const std::string& collate) {
  return fmt::format(R"(
model:     {}
dataset:   {{type: synthetic, tokens: {{vocabulary: 16, length: 10, min_length: 1}}, collate: {}, samples: 32,
            test_samples: 8}}
partition: {{stages: 2}}
scheme:    {{type: single}}
optimizer: {{type: adamw, lr: 0.01}}
run:       {{epochs: 1, batch_size: 16, seed: 3, dtype: float64, threads: 1, progress: false}}
)",
                     model, collate);
}

TEST(RaggedRuns, EverySchemeTrainsMicroBatchesOfDifferingLengthsToSinglesWeights) {
  for (const char* model : {kLlama, kTransformer}) {
    for (const char* collate : {"pad", "pack"}) {
      const std::string yaml = experiment(model, collate);
      const TensorDict single = testing::train(yaml);
      // Each with the settings it needs on top of 2 stages: replicas share a mini-batch by its
      // predicted tokens too.
      const std::vector<std::vector<std::string>> runs{
          {"scheme={type: gpipe, chunks: 4}"},
          {"scheme={type: pipedream_flush, chunks: 4}"},
          {"scheme={type: zb_h1, chunks: 4}"},
          {"scheme={type: seq1f1b, chunks: 4, segments: 3}"},
          {"scheme={type: interleaved_1f1b, chunks: 4}", "partition.stages=4"},
          {"scheme={type: pipedream_flush, chunks: 4}", "partition.recompute=always"},
          {"scheme={type: gpipe, chunks: 2}", "partition.replicas=2"},
          {"scheme={type: dp, replicas: 2}"},
      };
      for (const std::vector<std::string>& sets : runs) {
        SCOPED_TRACE(fmt::format("{} {} {}", model, collate, fmt::join(sets, " ")));
        EXPECT_LT(testing::max_difference(single, testing::train(yaml, sets)), 1e-10);
      }
    }
  }
}

TEST(RaggedRuns, ThreadedEqualsSequentialBitwise) {
  // The asynchronous 2BW reads whole mini-batches from the loader (and, with replicas, each
  // replica its share).
  const std::string yaml = experiment(kLlama, "pad");
  const std::vector<std::vector<std::string>> runs{{"scheme={type: pipedream_flush, chunks: 4}"},
                                                   {"scheme={type: seq1f1b, chunks: 4, segments: 2}"},
                                                   {"scheme={type: pipedream_2bw}"},
                                                   {"scheme={type: pipedream_2bw}", "partition.replicas=2"}};
  for (std::vector<std::string> sets : runs) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(sets, " ")));
    sets.push_back("run.executor=sequential");
    const TensorDict sequential = testing::train(yaml, sets);
    sets.back() = "run.executor={type: threaded, intra_op_threads: 1}";
    EXPECT_TRUE(testing::identical(sequential, testing::train(yaml, sets)));
  }
}

TEST(RaggedRuns, LaunchEqualsOneProcessBitwise) {
  if (!dist::available()) GTEST_SKIP() << "built without Gloo headers";
  testing::TempDir dir;
  testing::write_text(dir.file("e.yaml"), experiment(kLlama, "pack"));
  // Seq1F1B's segments of micro-batches cut from one batch; 2BW's whole mini-batches from the
  // loader, on 4 processes, two of which read neither inputs nor targets, only the layout.
  const std::pair<const char*, int> cases[] = {{"--set 'scheme={type: seq1f1b, chunks: 4, segments: 2}'", 2},
                                               {"--set 'scheme={type: pipedream_2bw, flush: epoch, micro_batches: 2}' "
                                                "--set partition.stages=4",
                                                4}};
  for (const auto& [sets, processes] : cases) {
    SCOPED_TRACE(sets);
    const std::string one = dir.file(fmt::format("one{}", processes)), many = dir.file(fmt::format("many{}", processes));
    const auto [c1, out1] =
        testing::pipelab(fmt::format("run {} --quiet {} --set run.output={}", dir.file("e.yaml"), sets, one));
    ASSERT_EQ(c1, 0) << out1;
    const auto [c2, out2] = testing::pipelab(
        fmt::format("launch --nproc {} {} {} --set run.output={}", processes, dir.file("e.yaml"), sets, many));
    ASSERT_EQ(c2, 0) << out2;
    testing::expect_same_run(one, many);
  }
}

TEST(RaggedRuns, WhatCannotReadDocumentsIsRefusedAtItsKey) {
  const auto error = [](const std::string& yaml) { return testing::user_error([&] { testing::train(yaml); }); };
  const std::string lstm = error(experiment("{type: residual_lstm, num_words: 16}", "pad"));
  EXPECT_NE(lstm.find("dataset.collate"), std::string::npos) << lstm;
  EXPECT_NE(lstm.find("model residual_lstm does not"), std::string::npos) << lstm;
  const std::string aq = testing::user_error([] {
    testing::train(experiment(kLlama, "pad"), {"scheme={type: pipedream_flush, chunks: 4}",
                                               "compression={activations: {type: aq_sgd, bits: 4}}"});
  });
  EXPECT_NE(aq.find("compression"), std::string::npos) << aq;
  EXPECT_NE(aq.find("differ in length"), std::string::npos) << aq;
  const std::string features = error(R"(
model:     {type: mlp, sizes: [784, 10]}
dataset:   {type: synthetic, collate: pack}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16}
)");
  EXPECT_NE(features.find("collate"), std::string::npos) << features;
  const std::string windows = error(R"(
model:     {type: llama, vocab: 16, hidden: 16, intermediate: 24, layers: 2, heads: 4, kv_heads: 2}
dataset:   {type: synthetic, tokens: {vocabulary: 16, length: 10, min_length: 2}}
scheme:    {type: single}
optimizer: {type: sgd, lr: 0.1}
run:       {epochs: 1, batch_size: 16}
)");
  EXPECT_NE(windows.find("min_length"), std::string::npos) << windows;
  EXPECT_NE(windows.find("collate: pad or pack"), std::string::npos) << windows;
}

}  // namespace
}  // namespace pipelab::ragged_text_test
