/// `glue`: a GLUE task from its TSV files (https://gluebenchmark.com/tasks), train.tsv for
/// training and dev.tsv for testing (test.tsv has no labels), each plain or .gz:
///   rte:  index, sentence1, sentence2, label (entailment = 0, not_entailment = 1)
///   sst2: sentence, label (0 negative, 1 positive)
///   cola: no header; source, label (0 unacceptable, 1 acceptable), original mark, sentence
/// Columns are found by the header's names (CoLA's by position).
///
/// `tokenizer: words` (default): words are encoded as for IMDB (datasets/text/vocabulary.h)
/// with a vocabulary counted over the training texts; a sentence pair becomes start,
/// sentence1, separator (id 3), sentence2, so words start at index_from 4.
/// `tokenizer: bpe`: a published byte-level BPE (`vocab`, `merges`: RoBERTa's or GPT-2's
/// vocab.json and merges.txt; datasets/text/bpe.h) with RoBERTa's layout — <s> A </s>, or
/// <s> A </s></s> B </s> — truncated longest first and padded with <pad> to maxlen, as
/// Hugging Face's tokenizer does with truncation=True, padding="max_length".
/// Defaults: maxlen 128 (gpipe_test's RTE setting, docs/schemes.md, "gpipe_test").
#include <ATen/ATen.h>

#include <algorithm>

#include "core/util/error.h"
#include "core/util/names.h"
#include "datasets/io/files.h"
#include "datasets/text/bpe.h"
#include "datasets/text/vocabulary.h"

namespace pipelab {
namespace {

struct GlueTask {
  std::string name, folder, download;
  std::vector<std::string> text_columns;
  std::vector<std::string> labels;  ///< label text -> its index
  /// A file without a header (CoLA's train.tsv and dev.tsv): the text and label columns by
  /// position.
  std::vector<size_t> text_positions = {};
  size_t label_position = 0;
  std::string metric = {};  ///< DataSpec::metric: GLUE's official one besides accuracy
};

const std::vector<GlueTask>& tasks() {
  static const std::vector<GlueTask> all{
      {"rte",
       "RTE",
       "https://dl.fbaipublicfiles.com/glue/data/RTE.zip",
       {"sentence1", "sentence2"},
       {"entailment", "not_entailment"}},
      {"sst2", "SST-2", "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip", {"sentence"}, {"0", "1"}},
      {"cola", "CoLA", "https://dl.fbaipublicfiles.com/glue/data/CoLA.zip", {}, {"0", "1"}, {3}, 1, "mcc"},
  };
  return all;
}

std::vector<std::string> task_names() {
  std::vector<std::string> out;
  for (const GlueTask& t : tasks()) out.push_back(t.name);
  return out;
}

/// The reserved ids: padding 0, start 1, out-of-vocabulary 2, separator 3.
constexpr int64_t kSeparator = 3;

SequenceOptions glue_sequence() {
  SequenceOptions s;
  s.num_words = 20000;
  s.maxlen = 128;
  s.index_from = 4;
  return s;
}

enum class Tokenizer { Words, Bpe };

struct GlueOptions {
  std::string task;
  std::optional<std::string> path;
  SequenceOptions sequence = glue_sequence();
  Tokenizer tokenizer = Tokenizer::Words;
  std::optional<std::string> vocab, merges;
  template <class V>
  void fields(V& v) {
    v.required("task", task, "rte, sst2 or cola", non_empty);
    v("path", path,
      "folder with train.tsv and dev.tsv, plain or .gz (default: <data_dir>/glue/RTE, glue/SST-2 or glue/CoLA)");
    sequence.fields(v);
    v.choice("tokenizer", tokenizer, Choices<Tokenizer>{{"words", Tokenizer::Words}, {"bpe", Tokenizer::Bpe}},
             "words: keras-style word ids counted over the training texts; bpe: a published byte-level BPE "
             "(vocab, merges) with RoBERTa's <s> </s> layout");
    v("vocab", vocab, "tokenizer: bpe: vocab.json (RoBERTa's or GPT-2's)");
    v("merges", merges, "tokenizer: bpe: merges.txt");
  }
  void check(const ConfigNode& node) const {
    if (tokenizer == Tokenizer::Bpe && (!vocab || !merges)) {
      node.fail("tokenizer: bpe needs the vocabulary's two files",
                "add vocab: <dir>/vocab.json and merges: <dir>/merges.txt (published with the model)");
    }
    for (const char* key : {"vocab", "merges"}) {
      if (tokenizer == Tokenizer::Words && node.has(key)) {
        node.child(key).fail("it is read with tokenizer: bpe only", "add tokenizer: bpe, or remove it");
      }
    }
    const std::vector<std::string> names = task_names();
    if (std::find(names.begin(), names.end(), task) == names.end()) {
      node.child("task").fail(fmt::format("'{}' is not a supported GLUE task ({})", task, join(names, ", ")),
                              fmt::format("use one of: {}", join(closest_first(task, names), ", ")));
    }
  }
};

/// One split: the texts of each example (one or two) and its label.
struct Rows {
  std::vector<std::vector<std::string>> texts;
  std::vector<int64_t> labels;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

/// Reads a GLUE TSV: a header naming the columns, then one example per line.
Rows read_tsv(const std::string& path, const GlueTask& task) {
  const std::string text = read_maybe_gzip(path);
  Rows rows;
  std::vector<std::string> header;
  std::vector<size_t> text_index;
  size_t label_index = 0;
  size_t begin = 0;
  for (int64_t line_no = 1; begin < text.size(); ++line_no) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cells = split_tabs(line);
    if (header.empty() && !task.text_positions.empty()) {  // no header: columns by position
      header.assign(cells.size(), "");
      text_index = task.text_positions;
      label_index = task.label_position;
      for (size_t i = 0; i < header.size(); ++i) header[i] = fmt::format("column {}", i + 1);
      if (cells.size() <= *std::max_element(text_index.begin(), text_index.end())) {
        throw UserError(fmt::format("{}:{}: {} columns; {}'s files have source, label, mark, sentence", path, line_no,
                                    cells.size(), task.folder));
      }
    } else if (header.empty()) {
      header = std::move(cells);
      const auto column = [&](const std::string& name) {
        const auto it = std::find(header.begin(), header.end(), name);
        if (it == header.end()) {
          throw UserError(fmt::format("{}:1: no column '{}' in the header ({}); is this the {} train.tsv/dev.tsv?",
                                      path, name, join(header, ", "), task.folder));
        }
        return static_cast<size_t>(it - header.begin());
      };
      for (const std::string& c : task.text_columns) text_index.push_back(column(c));
      label_index = column("label");
      continue;
    }
    if (cells.size() != header.size()) {
      throw UserError(fmt::format("{}:{}: {} tab-separated columns, expected {} ({}); fix or remove that line", path,
                                  line_no, cells.size(), header.size(), join(header, ", ")));
    }
    const auto label = std::find(task.labels.begin(), task.labels.end(), cells[label_index]);
    if (label == task.labels.end()) {
      throw UserError(fmt::format("{}:{}: label '{}' is not one of {}", path, line_no, cells[label_index],
                                  join(task.labels, ", ")));
    }
    std::vector<std::string> texts;
    for (const size_t i : text_index) texts.push_back(std::move(cells[i]));
    rows.texts.push_back(std::move(texts));
    rows.labels.push_back(label - task.labels.begin());
  }
  if (rows.labels.empty()) throw UserError(fmt::format("{}: no examples (expected a header line, then rows)", path));
  return rows;
}

class Glue : public Configured<DatasetFactory, GlueOptions> {
 public:
  using Configured::Configured;

  DatasetSplits load(const DataContext& context) const override {
    const GlueTask& task =
        *std::find_if(tasks().begin(), tasks().end(), [&](const GlueTask& t) { return t.name == options_.task; });
    const auto [key, problem] = sequence_problem(options_.sequence, kSeparator + 1);
    if (!key.empty()) fail(key, problem, "use index_from 4, start_char 1, oov_char 2 (3 separates sentence pairs)");
    const DatasetHome home{fmt::format("GLUE {}", task.folder),
                           {"glue/" + task.folder, task.folder},
                           fmt::format("download {} and unzip it into <data_dir>/glue", task.download)};
    const std::string dir = locate_dataset(context, options_.path, home);
    const Rows train = read_tsv(require_file(dir, "train.tsv", home), task);
    const Rows dev = read_tsv(require_file(dir, "dev.tsv", home), task);
    if (options_.tokenizer == Tokenizer::Bpe) return load_bpe(task, dir, train, dev);
    Vocabulary vocabulary;
    for (const auto& texts : train.texts) {
      for (const std::string& t : texts) vocabulary.count(tokenize(t));
    }
    vocabulary.finish();
    DatasetSplits out;
    out.train = encode(vocabulary, train);
    out.test = encode(vocabulary, dev);
    out.spec.input_shape = {options_.sequence.maxlen};
    out.spec.classes = static_cast<int64_t>(task.labels.size());
    out.spec.integer_input = true;
    out.spec.metric = task.metric;
    out.description = fmt::format(
        "GLUE {} from {}: {} train / {} dev, {} words in the training vocabulary, ids < {}, "
        "{} tokens",
        task.folder, dir, train.labels.size(), dev.labels.size(), vocabulary.words().size(),
        options_.sequence.num_words, options_.sequence.maxlen);
    return out;
  }

 private:
  DatasetSplits load_bpe(const GlueTask& task, const std::string& dir, const Rows& train, const Rows& dev) const {
    const BpeTokenizer bpe(*options_.vocab, *options_.merges);
    const int64_t maxlen = options_.sequence.maxlen;
    const auto encode = [&](const Rows& rows) {
      const auto n = static_cast<int64_t>(rows.labels.size());
      std::vector<int64_t> ids;
      ids.reserve(static_cast<size_t>(n * maxlen));
      for (const auto& texts : rows.texts) {
        std::vector<std::vector<int64_t>> parts;
        for (const std::string& t : texts) parts.push_back(bpe.encode(t));
        const std::vector<int64_t> row = roberta_ids(bpe, parts, maxlen);
        ids.insert(ids.end(), row.begin(), row.end());
      }
      return std::make_shared<TensorDataset>(at::tensor(ids, at::kLong).view({n, maxlen}),
                                             at::tensor(rows.labels, at::kLong));
    };
    DatasetSplits out;
    out.train = encode(train);
    out.test = encode(dev);
    out.spec.input_shape = {maxlen};
    out.spec.classes = static_cast<int64_t>(task.labels.size());
    out.spec.integer_input = true;
    out.spec.metric = task.metric;
    out.description = fmt::format("GLUE {} from {}: {} train / {} dev, byte-level BPE ({} ids, {}), {} tokens",
                                  task.folder, dir, train.labels.size(), dev.labels.size(), bpe.vocabulary_size(),
                                  *options_.vocab, maxlen);
    return out;
  }

  std::shared_ptr<Dataset> encode(const Vocabulary& vocabulary, const Rows& rows) const {
    const SequenceOptions& o = options_.sequence;
    const auto n = static_cast<int64_t>(rows.labels.size());
    std::vector<int64_t> ids(static_cast<size_t>(n * o.maxlen), 0);
    for (int64_t i = 0; i < n; ++i) {
      const auto& t = rows.texts[static_cast<size_t>(i)];
      put_sequence(ids, i, o.maxlen,
                   t.size() == 1 ? vocabulary.ids(tokenize(t[0]), o)
                                 : pair_ids(vocabulary, tokenize(t[0]), tokenize(t[1]), kSeparator, o));
    }
    return std::make_shared<TensorDataset>(at::tensor(ids, at::kLong).view({n, o.maxlen}),
                                           at::tensor(rows.labels, at::kLong));
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, Glue, "glue",
                 "GLUE RTE, SST-2 or CoLA from TSV files, keras-style word ids or a published byte-level BPE");

}  // namespace pipelab
