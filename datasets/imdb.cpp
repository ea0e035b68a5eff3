/// `imdb`: the Large Movie Review Dataset (Maas et al. 2011) from its text files,
/// aclImdb/{train,test}/{neg,pos}/<id>_<rating>.txt, encoded as keras.datasets.imdb does
/// (SpecTrain's IMDB setting, docs/schemes.md, "SpecTrain: common settings": the 10,000 most frequent words,
/// index_from 3, start 1, out-of-vocabulary 2, padded/truncated at the end to 200 tokens);
/// the tokenisation and tie order are documented in datasets/text/vocabulary.h. The
/// vocabulary is counted over the 25,000 training reviews. Labels: neg 0, pos 1. Within a
/// split, negative reviews come first, each folder in file-name order (the loader shuffles).
///
/// `task: lm` turns the reviews into a language-modelling corpus instead: each split's reviews
/// (whole, not truncated, each opened by start_char) become consecutive windows of maxlen
/// words whose targets are the next words (datasets/text/lm_windows.h); the labels are not
/// used, and the classes are the num_words ids. With `collate: pad` or `pack` the examples are
/// cut at each review's end instead (ragged text, datasets/text/ragged_text.h): a review is
/// one piece, or several of maxlen + 1 words when longer.
///
/// Reading and tokenising 50,000 files takes seconds, so the encoded result is cached in a
/// .pt file in pipelab's cache folder (core/util/cache_folder.h; never the dataset folder,
/// which may be read-only or shared), keyed by the folder, the encoding options and the
/// folders' file counts and sizes (a changed dataset or option makes a new cache). A cache
/// that cannot be written is skipped.
#include <ATen/ATen.h>

#include <filesystem>

#include "core/io/pt_file.h"
#include "core/util/cache_folder.h"
#include "core/util/error.h"
#include "datasets/io/files.h"
#include "datasets/text/lm_windows.h"
#include "datasets/text/ragged_text.h"
#include "datasets/text/vocabulary.h"

namespace fs = std::filesystem;

namespace pipelab {
namespace {

const char* const kSplits[] = {"train", "test"};
const char* const kLabels[] = {"neg", "pos"};

enum class Task { Classify, Lm };

struct ImdbOptions {
  std::optional<std::string> path;
  SequenceOptions sequence;
  Task task = Task::Classify;
  Collate collate = Collate::Windows;
  bool cache = true;
  template <class V>
  void fields(V& v) {
    v("path", path, "the aclImdb folder (default: <data_dir>/imdb/aclImdb)");
    sequence.fields(v);
    v.choice("task", task, Choices<Task>{{"classify", Task::Classify}, {"lm", Task::Lm}},
             "classify = one review, one sentiment label; lm = language modelling: windows of maxlen words of the "
             "concatenated reviews, each word's target the next one");
    collate_field(v, collate);
    v("cache", cache,
      "keep the encoded reviews in a .pt file in pipelab's cache folder ($PIPELAB_CACHE, else "
      "$XDG_CACHE_HOME/pipelab, else ~/.cache/pipelab) for the next run");
  }
  void check(const ConfigNode& node) const {
    if (collate != Collate::Windows && task != Task::Lm) {
      node.child("collate").fail("batches a language model's text, but task is classify",
                                 "set task: lm, or leave collate out (reviews padded to maxlen, as keras does)");
    }
  }
  bool ragged() const { return task == Task::Lm && collate != Collate::Windows; }
};

/// The review files of one split, per label.
struct SplitFiles {
  std::vector<std::string> files[2];
};

/// One split as ids [N, maxlen] and labels [N]; ragged text's as its pieces' ids one after
/// the other (x) and where each starts, with the end (y: [pieces + 1]).
struct Encoded {
  at::Tensor x, y;
};

/// The pieces of an Encoded split of ragged text.
std::vector<std::vector<int64_t>> pieces_of(const Encoded& e) {
  const at::Tensor ids = e.x.to(at::kLong).contiguous(), starts = e.y.to(at::kLong).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t* start = starts.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i + 1 < starts.numel(); ++i) out.emplace_back(id + start[i], id + start[i + 1]);
  return out;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

class Imdb : public Configured<DatasetFactory, ImdbOptions> {
 public:
  using Configured::Configured;

  DatasetSplits load(const DataContext& context) const override {
    const auto [key, problem] = sequence_problem(options_.sequence, 3);
    if (!key.empty()) fail(key, problem, "use keras's layout: index_from 3, start_char 1, oov_char 2");
    const DatasetHome home{
        "IMDB",
        {"imdb/aclImdb", "aclImdb"},
        "download https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz and extract it into "
        "<data_dir>/imdb (tar xzf aclImdb_v1.tar.gz -C <data_dir>/imdb), which gives <data_dir>/imdb/aclImdb"};
    const std::string dir = locate_dataset(context, options_.path, home);
    SplitFiles files[2];
    std::string fingerprint =
        fmt::format("pipelab-imdb-v1 {} {} {} {} {}", options_.sequence.num_words, options_.sequence.maxlen,
                    options_.sequence.index_from, options_.sequence.start_char, options_.sequence.oov_char);
    if (options_.task == Task::Lm) fingerprint += options_.ragged() ? " lm-pieces" : " lm";
    for (int s = 0; s < 2; ++s) {
      for (int l = 0; l < 2; ++l) {
        const fs::path folder = fs::path(dir) / kSplits[s] / kLabels[l];
        if (!fs::is_directory(folder)) {
          throw UserError(
              fmt::format("IMDB: folder {} not found (expected aclImdb/{{train,test}}/{{neg,pos}}/*.txt in "
                          "{}); {}",
                          folder.string(), dir, home.how_to_get));
        }
        files[s].files[l] = list_files(folder.string(), ".txt");
        if (files[s].files[l].empty()) {
          throw UserError(fmt::format("IMDB: no .txt review in {}; the extraction looks incomplete: {}",
                                      folder.string(), home.how_to_get));
        }
        uintmax_t bytes = 0;
        for (const std::string& f : files[s].files[l]) bytes += fs::file_size(f);
        fingerprint += fmt::format(" {}:{}", files[s].files[l].size(), bytes);
      }
    }
    // The encoded reviews are kept in the cache folder, not beside the reviews: a data folder
    // may be read-only or shared. The digest holds the folder, so two copies cache apart.
    fingerprint += " " + fs::absolute(dir).lexically_normal().string();
    const std::string cache =
        (fs::path(cache_folder()) / "datasets" / fmt::format("imdb-{:016x}.pt", fnv1a(fingerprint))).string();
    Encoded train, test;
    std::string cache_note;
    if (options_.cache && read_cache(cache, train, test)) {
      cache_note = "read from the cache " + cache;
    } else {
      Vocabulary vocabulary;
      std::vector<std::string> texts[2][2];
      for (int l = 0; l < 2; ++l) {
        for (const std::string& f : files[0].files[l]) {
          texts[0][l].push_back(read_file(f));
          vocabulary.count(tokenize(texts[0][l].back()));
        }
        for (const std::string& f : files[1].files[l]) texts[1][l].push_back(read_file(f));
      }
      vocabulary.finish();
      train = encode(vocabulary, texts[0]);
      test = encode(vocabulary, texts[1]);
      if (options_.cache) cache_note = write_cache(cache, train, test);
    }
    DatasetSplits out;
    std::string ragged_note;
    if (options_.ragged()) {
      const auto train_text = std::make_shared<RaggedText>(pieces_of(train), options_.sequence.maxlen, options_.collate);
      const auto test_text = std::make_shared<RaggedText>(pieces_of(test), options_.sequence.maxlen, options_.collate);
      ragged_note = fmt::format("; train: {}; test: {}", train_text->description(), test_text->description());
      out.train = train_text;
      out.test = test_text;
      out.spec.documents = true;
    } else {
      out.train = std::make_shared<TensorDataset>(train.x, train.y);
      out.test = std::make_shared<TensorDataset>(test.x, test.y);
    }
    out.spec.input_shape = {options_.sequence.maxlen};
    out.spec.classes = 2;
    out.spec.integer_input = true;
    if (options_.task == Task::Lm) {
      const char* empty = out.train->size() == 0 ? "training" : "test";
      if ((out.train->size() == 0 || out.test->size() == 0) && options_.ragged()) {
        // A piece needs two words (an input and the next word it predicts), whatever maxlen is.
        fail("collate", fmt::format("the {} reviews in {} hold no two words to predict one from the other: every "
                                    "review of that split is empty or one word long",
                                    empty, dir),
             "give reviews with words (the .txt files of that split look empty), or use another dataset");
      }
      if (out.train->size() == 0 || out.test->size() == 0) {
        fail("maxlen", fmt::format("the {} reviews in {} fill no window of {} words", empty, dir, options_.sequence.maxlen),
             "use a smaller maxlen");
      }
      out.spec.classes = options_.sequence.num_words;
      out.spec.target_shape = {options_.sequence.maxlen};
    }
    out.description = fmt::format("IMDB reviews from {}{}: {} train / {} test, {} ids of {} tokens{}{}", dir,
                                  options_.task == Task::Lm ? " as a language model (next word)" : "",
                                  out.train->size(), out.test->size(), options_.sequence.num_words,
                                  options_.sequence.maxlen, ragged_note, cache_note.empty() ? "" : "; " + cache_note);
    return out;
  }

 private:
  Encoded encode(const Vocabulary& vocabulary, const std::vector<std::string> (&texts)[2]) const {
    const int64_t maxlen = options_.sequence.maxlen;
    if (options_.task == Task::Lm) {
      std::vector<std::vector<int64_t>> documents;
      for (int l = 0; l < 2; ++l) {
        for (const std::string& t : texts[l]) documents.push_back(vocabulary.ids(tokenize(t), options_.sequence));
      }
      if (options_.ragged()) {
        std::vector<int64_t> ids, starts{0};
        for (const std::vector<int64_t>& p : document_pieces(documents, maxlen)) {
          ids.insert(ids.end(), p.begin(), p.end());
          starts.push_back(static_cast<int64_t>(ids.size()));
        }
        return {at::tensor(ids, at::kLong), at::tensor(starts, at::kLong)};
      }
      const LanguageModelWindows w = language_model_windows(documents, maxlen);
      return {w.x, w.y};
    }
    const int64_t n = static_cast<int64_t>(texts[0].size() + texts[1].size());
    std::vector<int64_t> ids(static_cast<size_t>(n * maxlen), 0), labels;
    for (int l = 0; l < 2; ++l) {
      for (const std::string& t : texts[l]) {
        put_sequence(ids, static_cast<int64_t>(labels.size()), maxlen, vocabulary.ids(tokenize(t), options_.sequence));
        labels.push_back(l);
      }
    }
    return {at::tensor(ids, at::kLong).view({n, maxlen}), at::tensor(labels, at::kLong)};
  }

  /// Reads a cache written by write_cache; false (rebuild) when it is absent or unusable.
  bool read_cache(const std::string& path, Encoded& train, Encoded& test) const {
    if (!fs::is_regular_file(path)) return false;
    try {
      const TensorDict d = load_tensor_dict(path);
      if (d.size() != 4) return false;
      train = {d[0].second.to(at::kLong), d[1].second.to(at::kLong)};
      test = {d[2].second.to(at::kLong), d[3].second.to(at::kLong)};
      if (options_.ragged()) {
        // Pieces: ids and their starts, which must end at the ids' end.
        const auto fits = [](const Encoded& e) {
          return e.x.dim() == 1 && e.y.dim() == 1 && e.y.numel() >= 1 && e.y[-1].item<int64_t>() == e.x.numel();
        };
        return fits(train) && fits(test);
      }
      if (train.x.dim() != 2 || train.x.size(1) != options_.sequence.maxlen || test.x.dim() != 2 ||
          test.x.size(1) != options_.sequence.maxlen) {
        return false;
      }
      return train.x.size(0) == train.y.size(0) && test.x.size(0) == test.y.size(0);
    } catch (const UserError&) {
      return false;  // a damaged cache is rebuilt (and rewritten)
    }
  }

  /// Saves the encoded splits (ids as int32, half the size); "" or why it was not written.
  static std::string write_cache(const std::string& path, const Encoded& train, const Encoded& test) {
    try {
      std::error_code ec;
      fs::create_directories(fs::path(path).parent_path(), ec);
      save_tensor_dict(path, {{"x_train", train.x.to(at::kInt)},
                              {"y_train", train.y.dim() > 1 ? train.y.to(at::kInt) : train.y},
                              {"x_test", test.x.to(at::kInt)},
                              {"y_test", test.y.dim() > 1 ? test.y.to(at::kInt) : test.y}});
      return "cached in " + path;
    } catch (const std::exception& e) {
      return fmt::format("not cached ({})", e.what());
    }
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, Imdb, "imdb",
                 "IMDB movie reviews (aclImdb text files), keras-style word ids, 2 classes");

}  // namespace pipelab
