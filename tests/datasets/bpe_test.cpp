// Byte-level BPE (datasets/text/bpe.h): pipelab's ids equal Hugging Face's on a vocabulary
// trained by `tokenizers` (tests/datasets/bpe_reference.py, run when Python's tokenizers is
// installed) over GLUE RTE's training sentences (when ../shared/data has them) and texts
// with every kind of whitespace, digits, contractions and non-ASCII letters; RoBERTa's
// special-token layout, truncation and padding equal `transformers`' RobertaTokenizer's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "core/io/input_file.h"
#include "datasets/text/bpe.h"
#include "tests/support/helpers.h"

namespace pipelab::bpe_test {
namespace {

bool tokenizers_available() {
  static const bool available = testing::shell("python3 -c 'import tokenizers' >/dev/null 2>&1").first == 0;
  return available;
}

TEST(Bpe, TheSameIdsAsHuggingFace) {
  if (!tokenizers_available()) GTEST_SKIP() << "Python's tokenizers is not installed (tools/setup.sh --all installs it)";
  testing::TempDir dir;
  const std::string rte = PIPELAB_SHARED_DATA_DIR "/glue/RTE/train.tsv.gz";
  const auto [rc, out] = testing::shell("python3 " PIPELAB_SOURCE_DIR "/tests/datasets/bpe_reference.py " +
                                        dir.file("bpe") + (std::filesystem::exists(rte) ? " " + rte : "") + " 2>&1");
  ASSERT_EQ(rc, 0) << out;
  const BpeTokenizer bpe(dir.file("bpe/vocab.json"), dir.file("bpe/merges.txt"));
  const nlohmann::json cases = nlohmann::json::parse(read_file(dir.file("bpe/cases.json")));
  const auto& texts = cases.at("texts");
  size_t differ = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int64_t> want = cases.at("ids")[i].get<std::vector<int64_t>>();
    const std::vector<int64_t> got = bpe.encode(texts[i].get<std::string>());
    if (got != want && ++differ <= 5) ADD_FAILURE() << "text " << i << ": '" << texts[i].get<std::string>() << "'";
  }
  EXPECT_EQ(differ, 0u) << "of " << texts.size() << " texts";
  std::cout << "[ bpe ] " << texts.size() << " texts, all ids equal\n";
  for (const auto& pair : cases.at("pairs")) {
    const std::vector<int64_t> got =
        roberta_ids(bpe, {bpe.encode(pair[0].get<std::string>()), bpe.encode(pair[1].get<std::string>())},
                    pair[2].get<int64_t>());
    EXPECT_EQ(got, pair[3].get<std::vector<int64_t>>()) << pair[0] << " | " << pair[1];
  }
  if (cases.contains("single")) {
    const auto& s = cases.at("single");
    EXPECT_EQ(roberta_ids(bpe, {bpe.encode(s[0].get<std::string>())}, s[1].get<int64_t>()),
              s[2].get<std::vector<int64_t>>());
  }
}

TEST(Bpe, MalformedFilesAreNamed) {
  testing::TempDir dir;
  testing::write_text(dir.file("vocab.json"), R"({"a": 0, "b": 1, "ab": 2, "<s>": 3, "</s>": 4, "<pad>": 5})");
  testing::write_text(dir.file("merges.txt"), "#version: 0.2\na b\n");
  const BpeTokenizer bpe(dir.file("vocab.json"), dir.file("merges.txt"));
  EXPECT_EQ(bpe.encode("ab"), (std::vector<int64_t>{2}));
  EXPECT_EQ(roberta_ids(bpe, {{2, 2, 2}}, 4), (std::vector<int64_t>{3, 2, 2, 4}));  // cut at the end
  EXPECT_NE(testing::user_error([&] { bpe.encode("abc"); }).find("no id for the BPE symbol 'c'"), std::string::npos);
  testing::write_text(dir.file("bad.txt"), "#version: 0.2\na b c\n");
  EXPECT_NE(testing::user_error([&] { BpeTokenizer(dir.file("vocab.json"), dir.file("bad.txt")); })
                .find("bad.txt:2: expected two symbols"),
            std::string::npos);
  testing::write_text(dir.file("bad.json"), "[1, 2");
  EXPECT_NE(testing::user_error([&] { BpeTokenizer(dir.file("bad.json"), dir.file("merges.txt")); })
                .find("bad.json: not a JSON vocabulary"),
            std::string::npos);
}

}  // namespace
}  // namespace pipelab::bpe_test
