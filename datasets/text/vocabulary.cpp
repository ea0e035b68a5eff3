#include "datasets/text/vocabulary.h"

#include <algorithm>
#include <array>

#include "core/util/error.h"

namespace pipelab {
namespace {

// keras's default `filters`, plus the other ASCII whitespace characters.
constexpr std::string_view kFilters = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n\r\v\f";

std::array<bool, 256> separator_table() {
  std::array<bool, 256> t{};
  for (const char c : kFilters) t[static_cast<unsigned char>(c)] = true;
  t[static_cast<unsigned char>(' ')] = true;
  return t;
}

}  // namespace

std::vector<std::string> tokenize(std::string_view text) {
  static const std::array<bool, 256> separator = separator_table();
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '<' && (text.compare(i, 6, "<br />") == 0 || text.compare(i, 5, "<br/>") == 0)) {
      i += text[i + 3] == ' ' ? 5 : 4;
      if (!word.empty()) words.push_back(std::move(word)), word.clear();
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    if (separator[u]) {
      if (!word.empty()) words.push_back(std::move(word)), word.clear();
    } else {
      word.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

void Vocabulary::count(const std::vector<std::string>& words) {
  for (const std::string& w : words) ++counts_[w];
}

void Vocabulary::finish() {
  std::vector<std::pair<std::string, int64_t>> sorted(counts_.begin(), counts_.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  words_.clear();
  ranks_.clear();
  for (const auto& [word, n] : sorted) {
    words_.push_back(word);
    ranks_.emplace(word, static_cast<int64_t>(words_.size()));
  }
  counts_.clear();
}

int64_t Vocabulary::rank(const std::string& word) const {
  const auto it = ranks_.find(word);
  return it == ranks_.end() ? 0 : it->second;
}

std::vector<int64_t> Vocabulary::ids(const std::vector<std::string>& words, const SequenceOptions& o) const {
  std::vector<int64_t> out;
  out.reserve(words.size() + 1);
  out.push_back(o.start_char);
  for (const std::string& w : words) {
    const int64_t r = rank(w);
    const int64_t id = r + o.index_from;
    out.push_back(r > 0 && id < o.num_words ? id : o.oov_char);
  }
  return out;
}

void put_sequence(std::vector<int64_t>& out, int64_t row, int64_t maxlen, const std::vector<int64_t>& ids) {
  const int64_t n = std::min<int64_t>(maxlen, static_cast<int64_t>(ids.size()));
  std::copy(ids.begin(), ids.begin() + n, out.begin() + row * maxlen);
}

std::vector<int64_t> pair_ids(const Vocabulary& vocabulary, const std::vector<std::string>& a,
                              const std::vector<std::string>& b, int64_t separator, const SequenceOptions& o) {
  std::vector<int64_t> ia = vocabulary.ids(a, o), ib = vocabulary.ids(b, o);
  ib.erase(ib.begin());  // one start token for the pair
  // start + a + separator + b must fit: drop words from the end of the longer sentence.
  const auto budget = static_cast<size_t>(std::max<int64_t>(o.maxlen - 2, 0));
  while (ia.size() - 1 + ib.size() > budget) {
    if (ia.size() - 1 >= ib.size()) {
      ia.pop_back();
    } else {
      ib.pop_back();
    }
  }
  ia.push_back(separator);
  ia.insert(ia.end(), ib.begin(), ib.end());
  return ia;
}

std::pair<std::string, std::string> sequence_problem(const SequenceOptions& o, int64_t reserved_ids) {
  if (o.index_from < reserved_ids - 1) {
    return {"index_from", fmt::format("must be at least {}: ids 0 to {} are reserved (padding, start, "
                                      "out-of-vocabulary{})",
                                      reserved_ids - 1, reserved_ids - 1, reserved_ids > 3 ? ", separator" : "")};
  }
  for (const auto& [key, id] : {std::make_pair("start_char", o.start_char), std::make_pair("oov_char", o.oov_char)}) {
    if (id == 0 || id > o.index_from) {
      return {key, fmt::format("is {}, but must be a reserved id between 1 and index_from ({})", id, o.index_from)};
    }
  }
  if (o.num_words <= o.index_from + 1) {
    return {"num_words", fmt::format("is {}, which leaves no word (word ids start at index_from + 1 = {})", o.num_words,
                                     o.index_from + 1)};
  }
  return {"", ""};
}

}  // namespace pipelab
