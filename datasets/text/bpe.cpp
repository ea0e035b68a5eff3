#include "datasets/text/bpe.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <nlohmann/json.hpp>

#include <climits>
#include <sstream>

#include "core/io/input_file.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

/// Python's \s on str (Unicode whitespace); RE2's \s is ASCII only.
#define PIPELAB_WS R"(\t\n\v\f\r \x{1c}-\x{1f}\x{85}\p{Z})"
/// GPT-2's pattern without its look-ahead alternative (see bpe.h); RE2's alternation is
/// leftmost-first, as Python's `regex` is.
/// leftmost-first, as Python's `regex` is. One group: what RE2::Consume hands back.
constexpr const char* kPattern =
    R"(('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" PIPELAB_WS R"(\p{L}\p{N}]+|[)" PIPELAB_WS R"(]+))";
constexpr const char* kSpaces = "[" PIPELAB_WS "]+";
#undef PIPELAB_WS

/// GPT-2's bytes_to_unicode, as UTF-8 strings: byte b -> the character standing for it.
const std::vector<std::string>& byte_symbols() {
  static const std::vector<std::string> table = [] {
    const auto utf8 = [](int cp) {
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {  // every code point here is below 0x800
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      return s;
    };
    std::vector<std::string> out(256);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      out[static_cast<size_t>(b)] = utf8(printable ? b : next++);
    }
    return out;
  }();
  return table;
}

/// The UTF-8 characters of `s` (a malformed byte stands alone).
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

struct BpeTokenizer::Pattern {
  RE2 re{kPattern}, spaces{kSpaces};
};

BpeTokenizer::BpeTokenizer(const std::string& vocab_json, const std::string& merges_txt)
    : vocab_path_(vocab_json), pattern_(std::make_unique<Pattern>()) {
  PIPELAB_ASSERT(pattern_->re.ok(), "GPT-2's pattern does not compile: {}", pattern_->re.error());
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_json));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not a JSON vocabulary ({}). Fix: give the vocab.json the model was published with",
                                vocab_json, e.what()));
  }
  if (!vocab.is_object()) throw UserError(fmt::format("{}: expected an object {{token: id}}", vocab_json));
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      throw UserError(fmt::format("{}: the id of '{}' is not a non-negative integer", vocab_json, token));
    }
    vocab_[token] = id.get<int64_t>();
  }
  std::istringstream lines(read_file(merges_txt));
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      throw UserError(fmt::format("{}:{}: expected two symbols separated by one space, got '{}'", merges_txt, line_no, line));
    }
    ranks_.emplace(std::make_pair(line.substr(0, space), line.substr(space + 1)), static_cast<int>(ranks_.size()));
  }
}

BpeTokenizer::~BpeTokenizer() = default;

int64_t BpeTokenizer::special(const std::string& token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) {
    throw UserError(fmt::format("{}: no special token {}. Fix: give a RoBERTa/GPT-2 vocabulary", vocab_path_, token));
  }
  return it->second;
}

std::vector<std::string> BpeTokenizer::bpe(const std::string& word) const {
  std::vector<std::string> symbols;
  for (const unsigned char b : word) symbols.push_back(byte_symbols()[b]);
  while (symbols.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks_.find({symbols[i], symbols[i + 1]});
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT_MAX) break;
    // Merge every occurrence of the best pair, left to right, as GPT-2's encoder does.
    const std::string first = symbols[at], second = symbols[at + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == first && symbols[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

std::vector<int64_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  re2::StringPiece rest(text), piece;
  while (!rest.empty() && RE2::Consume(&rest, pattern_->re, &piece)) {
    // (?!\S): a whitespace run followed by a non-space leaves its last character to the
    // next pre-token.
    if (!rest.empty() && RE2::FullMatch(piece, pattern_->spaces) && characters(std::string(piece)).size() > 1) {
      const std::vector<std::string> chars = characters(std::string(piece));
      const size_t last = chars.back().size();
      rest = re2::StringPiece(piece.data() + piece.size() - last, rest.size() + last);
      piece.remove_suffix(last);
    }
    for (const std::string& symbol : bpe(std::string(piece))) {
      const auto it = vocab_.find(symbol);
      if (it == vocab_.end()) {
        throw UserError(fmt::format("{}: no id for the BPE symbol '{}'. Fix: give the vocab.json and merges.txt "
                                    "published together",
                                    vocab_path_, symbol));
      }
      ids.push_back(it->second);
    }
  }
  // Any text the pattern cannot consume (none: \s+ and [^\s\p{L}\p{N}]+ cover every
  // character) would be dropped; say so rather than train on less.
  PIPELAB_ASSERT(rest.empty(), "GPT-2's pattern stopped at '{}'", std::string(rest.substr(0, 20)));
  return ids;
}

std::vector<int64_t> roberta_ids(const BpeTokenizer& bpe, std::vector<std::vector<int64_t>> texts, int64_t maxlen) {
  PIPELAB_ASSERT(texts.size() == 1 || texts.size() == 2, "{} texts in one example", texts.size());
  const int64_t specials = texts.size() == 1 ? 2 : 4;
  if (maxlen < specials + static_cast<int64_t>(texts.size())) {
    throw UserError(fmt::format("maxlen {} leaves no room for the text besides RoBERTa's {} special tokens. Fix: raise "
                                "maxlen",
                                maxlen, specials));
  }
  const auto length = [&] {
    size_t n = 0;
    for (const auto& t : texts) n += t.size();
    return static_cast<int64_t>(n) + specials;
  };
  while (length() > maxlen) {
    auto& longer = texts.size() == 2 && texts[0].size() > texts[1].size() ? texts[0] : texts.back();
    longer.pop_back();
  }
  const int64_t start = bpe.special("<s>"), end = bpe.special("</s>"), pad = bpe.special("<pad>");
  std::vector<int64_t> out{start};
  out.insert(out.end(), texts[0].begin(), texts[0].end());
  out.push_back(end);
  if (texts.size() == 2) {
    out.push_back(end);
    out.insert(out.end(), texts[1].begin(), texts[1].end());
    out.push_back(end);
  }
  out.resize(static_cast<size_t>(maxlen), pad);
  return out;
}

}  // namespace pipelab
