// Keras-style tokenisation and ids, and the IMDB (aclImdb folder) and GLUE (TSV) datasets
// read from small files in the real layouts.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>

#include "datasets/io/gzip.h"
#include "datasets/text/lm_windows.h"
#include "datasets/text/vocabulary.h"
#include "tests/datasets/dataset_test_util.h"

namespace pipelab::text_test {
namespace {

using testing::contains;
using Words = std::vector<std::string>;

TEST(Text, TokenizeLikeKeras) {
  EXPECT_EQ(tokenize("This movie's GREAT!<br /><br />Really... 10/10, (truly)\tdon't-miss"),
            (Words{"this", "movie's", "great", "really", "10", "10", "truly", "don't", "miss"}));
  EXPECT_EQ(tokenize("a<br/>b  c\r\nd"), (Words{"a", "b", "c", "d"}));
  EXPECT_EQ(tokenize("~!@#$%^&*()_+"), Words{});
  EXPECT_EQ(tokenize("caf\xc3\xa9 <b>bold</b>"), (Words{"caf\xc3\xa9", "b", "bold", "b"}));
}

TEST(Text, IdsAreKerasImdbIds) {
  Vocabulary v;
  v.count({"b", "a", "c", "a", "b", "d", "a"});  // a: 3, b: 2, c and d: 1 (tie: byte order)
  v.finish();
  EXPECT_EQ(v.words(), (Words{"a", "b", "c", "d"}));
  EXPECT_EQ(v.rank("c"), 3);
  EXPECT_EQ(v.rank("zebra"), 0);
  SequenceOptions o;
  o.num_words = 6;  // ids 4 (a) and 5 (b) are kept; c would be 6 and becomes oov
  EXPECT_EQ(v.ids({"a", "c", "b", "zebra"}, o), (std::vector<int64_t>{1, 4, 2, 5, 2}));
  o.maxlen = 3;
  std::vector<int64_t> out(6, 0);
  put_sequence(out, 0, 3, v.ids({"a", "b", "a"}, o));  // truncated at the end
  put_sequence(out, 1, 3, v.ids({"b"}, o));            // padded at the end
  EXPECT_EQ(out, (std::vector<int64_t>{1, 4, 5, 1, 5, 0}));
}

TEST(Text, PairsTruncateTheLongerSentenceFirst) {
  Vocabulary v;
  v.count({"a", "b", "c", "d", "e", "f"});
  v.finish();
  SequenceOptions o;
  o.index_from = 4;
  o.maxlen = 7;  // start + 5 words + separator
  EXPECT_EQ(pair_ids(v, {"a", "b", "c", "d"}, {"e", "f"}, 3, o), (std::vector<int64_t>{1, 5, 6, 7, 3, 9, 10}));
  EXPECT_EQ(pair_ids(v, {"a"}, {"b", "c", "d", "e", "f"}, 3, o), (std::vector<int64_t>{1, 5, 3, 6, 7, 8, 9}));
  o.maxlen = 20;
  EXPECT_EQ(pair_ids(v, {"a"}, {"b"}, 3, o), (std::vector<int64_t>{1, 5, 3, 6}));
}

void review(const std::string& root, const std::string& split, const std::string& label, const std::string& name,
            const std::string& text) {
  testing::write_file(root + "/" + split + "/" + label + "/" + name, text);
}

/// Three training reviews and two test reviews in the aclImdb layout under `root`.
void five_reviews(const std::string& root) {
  review(root, "train", "neg", "0_1.txt", "Bad bad movie.<br /><br />Awful!");
  review(root, "train", "neg", "1_2.txt", "A bad plot");
  review(root, "train", "pos", "0_9.txt", "A good, good movie");
  review(root, "test", "neg", "0_3.txt", "bad unseen words here");
  review(root, "test", "pos", "0_10.txt", "GOOD");
}

/// $PIPELAB_CACHE pointed at `dir` for one test (each test runs in a process of its own).
struct CacheIn {
  explicit CacheIn(const std::string& dir) { ::setenv("PIPELAB_CACHE", dir.c_str(), 1); }
  ~CacheIn() { ::unsetenv("PIPELAB_CACHE"); }
};

TEST(Text, ImdbFolderWithCache) {
  testing::TempDir dir;
  const CacheIn cache(dir.file("cache"));
  const std::string root = dir.file("imdb/aclImdb");
  five_reviews(root);
  // Counts: bad 3, good 2, a 2, movie 2, awful 1, plot 1 -> ranks bad, a, good, movie, awful, plot.
  const std::string yaml = "{type: imdb, num_words: 8, maxlen: 4}";
  const auto splits = testing::load_dataset(yaml, dir.path());
  EXPECT_TRUE(splits.spec.integer_input);
  EXPECT_EQ(splits.spec.input_shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(splits.spec.classes, 2);
  const Batch train = testing::whole(*splits.train), test = testing::whole(*splits.test);
  EXPECT_TRUE(at::equal(train.y, at::tensor({0, 0, 1}, at::kLong)));
  // bad=4 a=5 good=6 movie=7; awful (8) and plot (9) are >= num_words: oov 2.
  EXPECT_TRUE(at::equal(train.x, at::tensor({1, 4, 4, 7, 1, 5, 4, 2, 1, 5, 6, 6}, at::kLong).view({3, 4})));
  EXPECT_TRUE(at::equal(test.x, at::tensor({1, 4, 2, 2, 1, 6, 0, 0}, at::kLong).view({2, 4})));
  EXPECT_TRUE(contains(splits.description, "cached in"));
  // The second load reads the cache and gives the same tensors.
  const auto again = testing::load_dataset(yaml, dir.path());
  EXPECT_TRUE(contains(again.description, "read from the cache"));
  EXPECT_TRUE(at::equal(testing::whole(*again.train).x, train.x));
  EXPECT_TRUE(at::equal(testing::whole(*again.test).y, test.y));
  // Other options make another cache.
  EXPECT_TRUE(
      contains(testing::load_dataset("{type: imdb, num_words: 9, maxlen: 4}", dir.path()).description, "cached in"));
  // The cache is pipelab's, never the data folder's (which may be read-only or shared).
  int cached = 0, beside = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.file("cache"))) cached += e.path().extension() == ".pt";
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.file("imdb"))) beside += e.path().extension() == ".pt";
  EXPECT_EQ(cached, 2);
  EXPECT_EQ(beside, 0);
  // A damaged cache is rebuilt.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.file("cache"))) {
    if (e.path().extension() == ".pt") testing::write_file(e.path().string(), "garbage");
  }
  EXPECT_TRUE(at::equal(testing::whole(*testing::load_dataset(yaml, dir.path()).train).x, train.x));
}

// Ragged text needs two words a review to predict one from the other, whatever maxlen is.
TEST(Text, ImdbReviewsWithoutWordsAreNamedAsSuchUnderRaggedText) {
  testing::TempDir dir;
  const CacheIn cache(dir.file("cache"));
  const std::string root = dir.file("imdb/aclImdb");
  for (const char* split : {"train", "test"}) {
    for (const char* label : {"neg", "pos"}) review(root, split, label, "0_1.txt", "");
  }
  const std::string error = testing::load_error("{type: imdb, num_words: 8, maxlen: 4, task: lm, collate: pad}", dir.path());
  EXPECT_TRUE(contains(error, "dataset.collate: the training reviews in")) << error;
  EXPECT_TRUE(contains(error, "hold no two words")) << error;
  EXPECT_FALSE(contains(error, "smaller maxlen")) << error;
}

TEST(Text, LanguageModelWindowsShareOneWordWithTheirNeighbour) {
  // Stream 1 5 6 1 7 8 1 9: (8 - 1) / 2 = 3 windows of 2 + 1 ids, starting at 0, 2 and 4;
  // the tail "9" fills no window and is dropped.
  const LanguageModelWindows w = language_model_windows({{1, 5, 6}, {1, 7, 8}, {1, 9}}, 2);
  EXPECT_TRUE(at::equal(w.x, at::tensor({1, 5, 6, 1, 7, 8}, at::kLong).view({3, 2})));
  EXPECT_TRUE(at::equal(w.y, at::tensor({5, 6, 1, 7, 8, 1}, at::kLong).view({3, 2})));
  EXPECT_EQ(language_model_windows({{1, 5}}, 2).x.size(0), 0);  // no window of 3 ids
  EXPECT_EQ(language_model_windows({}, 2).y.sizes(), (std::vector<int64_t>{0, 2}));
}

TEST(Text, ImdbAsALanguageModel) {
  // The reviews of ImdbFolderWithCache, whole, one stream per split, windows of 3 words.
  testing::TempDir dir;
  const CacheIn cache(dir.file("cache"));
  const std::string root = dir.file("imdb/aclImdb");
  five_reviews(root);
  const std::string yaml = "{type: imdb, num_words: 8, maxlen: 3, task: lm}";
  const auto splits = testing::load_dataset(yaml, dir.path());
  EXPECT_EQ(splits.spec.classes, 8);
  EXPECT_EQ(splits.spec.target_shape, (std::vector<int64_t>{3}));
  // Train stream 1 4 4 7 2 | 1 5 4 2 | 1 5 6 6 7: (14 - 1) / 3 = 4 windows.
  const Batch train = testing::whole(*splits.train), test = testing::whole(*splits.test);
  EXPECT_TRUE(at::equal(train.x, at::tensor({1, 4, 4, 7, 2, 1, 5, 4, 2, 1, 5, 6}, at::kLong).view({4, 3})));
  EXPECT_TRUE(at::equal(train.y, at::tensor({4, 4, 7, 2, 1, 5, 4, 2, 1, 5, 6, 6}, at::kLong).view({4, 3})));
  // Test stream 1 4 2 2 2 | 1 6: two windows.
  EXPECT_TRUE(at::equal(test.x, at::tensor({1, 4, 2, 2, 2, 1}, at::kLong).view({2, 3})));
  EXPECT_TRUE(at::equal(test.y, at::tensor({4, 2, 2, 2, 1, 6}, at::kLong).view({2, 3})));
  EXPECT_TRUE(contains(splits.description, "as a language model"));
  // Its own cache, read back the same; the classification cache is another file.
  const auto again = testing::load_dataset(yaml, dir.path());
  EXPECT_TRUE(contains(again.description, "read from the cache"));
  EXPECT_TRUE(at::equal(testing::whole(*again.train).y, train.y));
  EXPECT_TRUE(at::equal(testing::whole(*testing::load_dataset("{type: imdb, num_words: 8, maxlen: 3}", dir.path()).train).y,
                        at::tensor({0, 0, 1}, at::kLong)));
  // A window longer than a split's stream.
  EXPECT_TRUE(contains(testing::load_error("{type: imdb, num_words: 8, maxlen: 9, task: lm}", dir.path()),
                       "fill no window of 9 words"));
}

TEST(Text, ImdbErrors) {
  testing::TempDir dir;
  EXPECT_TRUE(contains(testing::load_error("{type: imdb}", dir.path()), "aclImdb_v1.tar.gz"));
  testing::write_file(dir.file("aclImdb/train/neg/0_1.txt"), "bad");
  EXPECT_TRUE(contains(testing::load_error("{type: imdb}", dir.path()), "train/pos not found"));
  EXPECT_TRUE(contains(testing::load_error("{type: imdb, index_from: 1}", dir.path()),
                       "dataset.index_from: must be "
                       "at least 2"));
}

TEST(Text, GlueRteAndSst2) {
  testing::TempDir dir;
  const std::string rte =
      "index\tsentence1\tsentence2\tlabel\n"
      "0\tCats sleep.\tCats rest.\tentailment\n"
      "1\tDogs bark loudly.\tCats sleep.\tnot_entailment\r\n";
  testing::write_file(dir.file("glue/RTE/train.tsv"), rte);
  const std::string dev = "index\tsentence1\tsentence2\tlabel\n0\tDogs rest.\tCats bark.\tnot_entailment\n";
  testing::write_file(dir.file("glue/RTE/dev.tsv") + (gzip_supported() ? ".gz" : ""),
                      gzip_supported() ? gzip_compress(dev) : dev);
  const auto splits = testing::load_dataset("{type: glue, task: rte, maxlen: 8}", dir.path());
  EXPECT_EQ(splits.spec.classes, 2);
  // Counts: cats 3, sleep 2, bark 1, dogs 1, loudly 1, rest 1 -> ids from 5 in that order.
  const Batch train = testing::whole(*splits.train);
  EXPECT_TRUE(at::equal(train.y, at::tensor({0, 1}, at::kLong)));
  EXPECT_TRUE(at::equal(train.x[0], at::tensor({1, 5, 6, 3, 5, 10, 0, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(train.x[1], at::tensor({1, 8, 7, 9, 3, 5, 6, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(testing::whole(*splits.test).x[0], at::tensor({1, 8, 10, 3, 5, 7, 0, 0}, at::kLong)));

  testing::write_file(dir.file("glue/SST-2/train.tsv"), "sentence\tlabel\nhide new secretions \t0\ngreat fun \t1\n");
  testing::write_file(dir.file("glue/SST-2/dev.tsv"), "sentence\tlabel\ngreat \t1\n");
  const auto sst = testing::load_dataset("{type: glue, task: sst2}", dir.path());
  EXPECT_EQ(sst.spec.input_shape, (std::vector<int64_t>{128}));
  EXPECT_TRUE(at::equal(testing::whole(*sst.test).x[0].narrow(0, 0, 3),
                        at::tensor({1, 6, 0}, at::kLong)));  // fun, great, ... (ties in byte order)
}

TEST(Text, GlueErrorsNameFileAndLine) {
  testing::TempDir dir;
  const std::string train = dir.file("glue/RTE/train.tsv");
  testing::write_file(dir.file("glue/RTE/dev.tsv"), "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n");
  testing::write_file(train, "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta b\tentailment\n");
  EXPECT_TRUE(contains(testing::load_error("{type: glue, task: rte}", dir.path()),
                       train + ":3: 3 tab-separated columns, expected 4 (index, sentence1, sentence2, label)"));
  testing::write_file(train, "index\tsentence1\tsentence2\tlabel\n\n0\ta\tb\tmaybe\n");
  EXPECT_TRUE(contains(testing::load_error("{type: glue, task: rte}", dir.path()),
                       train + ":3: label 'maybe' is not one of entailment, not_entailment"));
  testing::write_file(train, "idx\ttext\n");
  EXPECT_TRUE(
      contains(testing::load_error("{type: glue, task: rte}", dir.path()), train + ":1: no column 'sentence1'"));
  EXPECT_TRUE(contains(testing::load_error("{type: glue, task: sst2}", dir.path()), "GLUE SST-2 not found"));
  EXPECT_TRUE(contains(testing::load_error("{type: glue, task: rt}", dir.path()), "'rt' is not a supported GLUE task"));
  EXPECT_TRUE(contains(testing::load_error("{type: glue}", dir.path()), "missing required key 'task'"));
}

TEST(Text, GlueColaHasNoHeaderAndIsJudgedByMcc) {
  testing::TempDir dir;
  // CoLA's train.tsv and dev.tsv: source, label, original mark, sentence; no header.
  testing::write_file(dir.file("glue/CoLA/train.tsv"),
                      "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n");
  testing::write_file(dir.file("glue/CoLA/dev.tsv"), "gj04\t0\t*\tThe more we study verbs.\n");
  const auto splits = testing::load_dataset("{type: glue, task: cola, maxlen: 8}", dir.path());
  EXPECT_EQ(splits.spec.classes, 2);
  EXPECT_EQ(splits.spec.metric, "mcc");
  EXPECT_TRUE(at::equal(testing::whole(*splits.train).y, at::tensor({1, 0}, at::kLong)));
  EXPECT_EQ(testing::whole(*splits.train).x[0][0].item<int64_t>(), 1);  // start
  testing::write_file(dir.file("glue/CoLA/dev.tsv"), "gj04\t0\n");
  EXPECT_TRUE(contains(testing::load_error("{type: glue, task: cola}", dir.path()), "dev.tsv:1: 2 columns"));
}

}  // namespace
}  // namespace pipelab::text_test
