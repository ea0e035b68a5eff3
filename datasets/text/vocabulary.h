#pragma once
/// Keras-style text encoding, shared by the text datasets (IMDB, GLUE).
///
/// Tokenisation (keras.preprocessing.text.text_to_word_sequence, plus one step):
///   1. every "<br />" (and "<br/>") tag of the reviews becomes a space; keras's own
///      imdb.npz kept them, which is why "br" is its 7th most frequent word;
///   2. ASCII letters are lowercased (other bytes are kept as they are: UTF-8 text stays
///      valid, but non-ASCII capitals are not folded as Python's str.lower() would);
///   3. each of !"#$%&()*+,-./:;<=>?@[\]^_`{|}~ and tab/newline becomes a space (the
///      apostrophe is kept: "don't" is one word);
///   4. words are the runs of non-space characters (any ASCII whitespace separates).
///
/// Vocabulary: words ranked by their count over the training texts, most frequent first
/// (rank 1). Ties are ordered by the words' bytes (std::string's <), which does not depend
/// on the order the files are read in; keras orders ties by first occurrence instead.
///
/// Ids (keras.datasets.imdb.load_data): 0 padding, start_char (1) first, a word of rank r
/// becomes r + index_from, and any id >= num_words becomes oov_char (2). Sequences are then
/// padded or truncated at the end to maxlen (pad_sequences(padding='post',
/// truncating='post')); the start token counts towards maxlen.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/config/fields.h"

namespace pipelab {

/// The words of `text` (steps 1-4 above).
std::vector<std::string> tokenize(std::string_view text);

/// How token lists become fixed-length id sequences; embedded in each text dataset's
/// options with that dataset's defaults.
struct SequenceOptions {
  int64_t num_words = 10000;
  int64_t maxlen = 200;
  int64_t index_from = 3;
  int64_t start_char = 1;
  int64_t oov_char = 2;
  template <class V>
  void fields(V& v) {
    v("num_words", num_words, "ids are below this: the (num_words - index_from - 1) most frequent words are kept",
      positive);
    v("maxlen", maxlen, "sequence length: pad or truncate at the end", positive);
    v("index_from", index_from, "id of the most frequent word, minus 1 (lower ids are reserved)", non_negative);
    v("start_char", start_char, "id that starts every sequence", non_negative);
    v("oov_char", oov_char, "id of words outside the vocabulary", non_negative);
  }
};

/// Words ranked by frequency (rank 1 = most frequent; ties in byte order).
class Vocabulary {
 public:
  /// Counts words; call for every training text.
  void count(const std::vector<std::string>& words);
  /// Fixes the ranks (after the last count()).
  void finish();
  /// The rank of `word` (1-based), or 0 when it was never counted.
  int64_t rank(const std::string& word) const;
  /// Words by rank (words()[0] has rank 1).
  const std::vector<std::string>& words() const { return words_; }

  /// The ids of `words`: start_char, then each word's id (oov_char past num_words).
  std::vector<int64_t> ids(const std::vector<std::string>& words, const SequenceOptions& o) const;

 private:
  std::unordered_map<std::string, int64_t> counts_;
  std::unordered_map<std::string, int64_t> ranks_;
  std::vector<std::string> words_;
};

/// Appends `ids` to row `row` of `out` (int64 [N, maxlen], zero-filled): truncated at the
/// end when longer than maxlen.
void put_sequence(std::vector<int64_t>& out, int64_t row, int64_t maxlen, const std::vector<int64_t>& ids);

/// The ids of a sentence pair: start_char, a's words, `separator`, b's words. When that is
/// longer than maxlen, the longer sentence loses words at its end first (BERT's
/// "longest first"), so both sentences keep a share.
std::vector<int64_t> pair_ids(const Vocabulary& vocabulary, const std::vector<std::string>& a,
                              const std::vector<std::string>& b, int64_t separator, const SequenceOptions& o);

/// A one-line check of SequenceOptions: reserved ids below index_from + 1, and num_words
/// above them. Returns the problem ("" if none) and the offending key.
std::pair<std::string, std::string> sequence_problem(const SequenceOptions& o, int64_t reserved_ids);

}  // namespace pipelab
