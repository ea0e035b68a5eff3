#pragma once
/// GPT-2's byte-level BPE, the tokenizer RoBERTa uses, read from the two files every such
/// model publishes: vocab.json (token -> id) and merges.txt (one merge "a b" per line, in
/// rank order, after a "#version" line). Hand-written because no maintained C++ library for
/// it is packaged in Debian (Hugging Face's `tokenizers` is Rust with Python bindings); the
/// algorithm is the published one (Radford et al. 2019, openai/gpt-2 encoder.py):
///   1. the text is split into pre-tokens by GPT-2's pattern
///      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
///      (RE2 has no look-ahead: a whitespace run followed by a non-space gives back its last
///      character, which is what (?!\S) does);
///   2. each pre-token's UTF-8 bytes become printable characters by GPT-2's bytes_to_unicode
///      table (bytes 33-126, 161-172 and 174-255 stand for themselves, the others for
///      256 + n in byte order);
///   3. the lowest-ranked adjacent pair is merged until no pair has a rank;
///   4. each resulting symbol is looked up in the vocabulary.
/// tests/datasets/bpe_test.cpp checks the ids against the `tokenizers` package's on real text.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace pipelab {

class BpeTokenizer {
 public:
  /// Reads vocab.json and merges.txt; a malformed file is a UserError naming it and the line.
  BpeTokenizer(const std::string& vocab_json, const std::string& merges_txt);
  ~BpeTokenizer();
  /// The ids of `text` (no special tokens). A symbol missing from the vocabulary is a
  /// UserError: byte-level vocabularies hold every byte, so it means mismatched files.
  std::vector<int64_t> encode(const std::string& text) const;
  /// The id of a special token ("<s>", "</s>", "<pad>"); a UserError when absent.
  int64_t special(const std::string& token) const;
  int64_t vocabulary_size() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  std::vector<std::string> bpe(const std::string& word) const;
  std::unordered_map<std::string, int64_t> vocab_;
  std::map<std::pair<std::string, std::string>, int> ranks_;
  std::string vocab_path_;
  struct Pattern;
  std::unique_ptr<Pattern> pattern_;
};

/// RoBERTa's input for one text or a pair, as Hugging Face's tokenizer gives it with
/// truncation=True, padding="max_length": <s> A </s> or <s> A </s></s> B </s>, the texts cut
/// at their ends longest first (the second on a tie) to fit `maxlen`, then <pad> to maxlen.
std::vector<int64_t> roberta_ids(const BpeTokenizer& bpe, std::vector<std::vector<int64_t>> texts, int64_t maxlen);

}  // namespace pipelab
