/// `synthetic`: a deterministic, learnable classification task. Each example has a latent
/// vector z ~ N(0, I) of `latent` dimensions; the input is a fixed random projection of z
/// plus Gaussian noise (x = z P + noise * e), and the label is the argmax of a fixed random
/// teacher network on z (tanh(z W1) W2), optionally with a share of labels replaced at
/// random. Like real data, the inputs lie near a low-dimensional manifold, so models
/// generalise instead of memorising. Vector- or image-shaped, any size; the same `seed`
/// gives the same bytes on every machine.
///
/// `tokens: {vocabulary: V, length: T}` makes it a language-model task instead: windows of T
/// word ids and, as targets, the next word at every position (what `transformer` with
/// `head: lm` trains on). The words follow a fixed random successor table (each word has one
/// successor), a `label_noise` share of them replaced by random words: learnable, and as
/// large as the model it feeds (a plan's emitted file runs on it without a corpus). With
/// `collate: pad` or `pack` each example is a document of tokens.min_length to length words
/// instead, batched as ragged text (datasets/text/ragged_text.h).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>

#include "core/data/dataset.h"
#include "core/util/error.h"
#include "core/util/memory_size.h"
#include "datasets/text/ragged_text.h"

namespace pipelab {
namespace {

struct TokenOptions {
  int64_t vocabulary = 0;
  int64_t length = 0;
  int64_t min_length = 0;
  template <class V>
  void fields(V& v) {
    v("vocabulary", vocabulary, "words (word ids 0 to vocabulary - 1); 0: not a token task", InRange{0, 1e8});
    v("length", length, "words per window (the targets: the next word at each position)", InRange{0, 1e7});
    v("min_length", min_length,
      "with collate pad or pack: each example is a document of min_length to length words, uniformly (0: length)",
      InRange{0, 1e7});
  }
};

struct SyntheticOptions {
  int64_t samples = 8192;
  int64_t test_samples = 2048;
  std::vector<int64_t> shape{784};
  int64_t classes = 10;
  int64_t latent = 16;
  double noise = 0.5;
  int64_t hidden = 64;
  double label_noise = 0;
  int64_t seed = 0;
  template <class V>
  void fields(V& v) {
    v("samples", samples, "training examples", positive);
    v("test_samples", test_samples, "test examples", positive);
    v("shape", shape, "shape of one example, e.g. [784] or [1, 28, 28]", each(positive));
    v("classes", classes, "number of classes", InRange{2, 1e6});
    v("latent", latent, "dimension of the latent vector the labels depend on", positive);
    v("noise", noise, "standard deviation of the noise added to the projected latent", non_negative);
    v("hidden", hidden, "width of the random teacher network", positive);
    v("label_noise", label_noise, "share of labels replaced by random classes", in_range(0, 1));
    v("seed", seed, "seed of the teacher and the examples (independent of run.seed)", non_negative);
    v.section("tokens", tokens, "a language-model task instead: `tokens: {vocabulary: V, length: T}`");
    collate_field(v, collate);
  }
  Collate collate = Collate::Windows;
  TokenOptions tokens;
  /// Where dataset.samples is written ("file.yaml:3:5"), for check_memory's message.
  mutable std::string samples_at;
  void check(const ConfigNode& node) const {
    samples_at = node.has("samples") ? node.child("samples").where() : node.where();
    if (collate != Collate::Windows && !token_task()) {
      node.child("collate").fail("batches ragged text, but this is the feature task",
                                 "add tokens: {vocabulary: V, length: T, min_length: M}, or leave collate out");
    }
    // A resolved config (config.yaml) writes `tokens: {vocabulary: 0, length: 0}`: no token task.
    if (!node.has("tokens") || (tokens.vocabulary == 0 && tokens.length == 0)) return;
    const ConfigNode t = node.child("tokens");
    if (tokens.vocabulary < 2) t.fail("a token task needs a vocabulary of at least 2 words", "set tokens.vocabulary");
    if (tokens.length < 1) t.fail("a token task needs a window length", "set tokens.length (words per window)");
    if (tokens.min_length > tokens.length) {
      t.child("min_length").fail(fmt::format("is above tokens.length = {}", tokens.length),
                                 "use a min_length of at most length");
    }
    if (tokens.min_length > 0 && collate == Collate::Windows) {
      t.child("min_length").fail("sets document lengths, but the windows are all tokens.length long",
                                 "set dataset.collate: pad or pack, or leave min_length out");
    }
    // The feature task's keys mean nothing here; a resolved config writes their defaults.
    const SyntheticOptions defaults;
    const bool changed[] = {shape != defaults.shape, classes != defaults.classes, latent != defaults.latent,
                            hidden != defaults.hidden, noise != defaults.noise};
    const char* keys[] = {"shape", "classes", "latent", "hidden", "noise"};
    for (size_t k = 0; k < 5; ++k) {
      if (changed[k] && node.has(keys[k])) {
        node.child(keys[k]).fail("a token task has no features or teacher network",
                                 "leave it out with tokens (its windows are [tokens.length] word ids)");
      }
    }
  }
  bool token_task() const { return tokens.vocabulary > 0; }
  /// The examples (float32) and, while they are made, about two temporaries of their size:
  /// checked against this machine's memory when the data is made (not when an experiment
  /// meant for a bigger machine is only planned), before anything is allocated.
  void check_memory() const {
    double values = static_cast<double>(samples + test_samples);
    if (token_task()) {
      values *= static_cast<double>(tokens.length + 1) * 2;  // int64 words and their targets
    } else {
      for (const int64_t d : shape) values *= static_cast<double>(d);
    }
    const std::string problem = memory_problem(values * 4 * 3);
    if (!problem.empty()) {
      throw ConfigError(fmt::format("{}: dataset: {} examples of shape [{}] make {:.3g} values, which {}. Fix: use fewer "
                                    "dataset.samples or a smaller dataset.shape.",
                                    samples_at, samples + test_samples, fmt::join(shape, ", "), values, problem));
    }
  }
};

class Synthetic : public Configured<DatasetFactory, SyntheticOptions> {
 public:
  using Configured::Configured;
  DatasetSplits load(const DataContext&) const override {
    const auto& o = options_;
    o.check_memory();
    if (o.token_task()) return token_task();
    const int64_t d = std::accumulate(o.shape.begin(), o.shape.end(), int64_t{1}, std::multiplies<int64_t>());
    const int64_t n = o.samples + o.test_samples;
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(o.seed));
    const double k = static_cast<double>(o.latent);
    const at::Tensor projection = at::randn({o.latent, d}, gen) / std::sqrt(k);
    const at::Tensor w1 = at::randn({o.latent, o.hidden}, gen) / std::sqrt(k);
    const at::Tensor w2 = at::randn({o.hidden, o.classes}, gen) / std::sqrt(static_cast<double>(o.hidden));
    const at::Tensor z = at::randn({n, o.latent}, gen);
    const at::Tensor x = z.matmul(projection) + at::randn({n, d}, gen) * o.noise;
    at::Tensor y = at::tanh(z.matmul(w1)).matmul(w2).argmax(1);
    if (o.label_noise > 0) {
      const at::Tensor flip = at::rand({n}, gen) < o.label_noise;
      y = at::where(flip, at::randint(o.classes, {n}, gen, at::kLong), y);
    }
    std::vector<int64_t> full{n};
    full.insert(full.end(), o.shape.begin(), o.shape.end());
    const at::Tensor images = x.reshape(full);
    DatasetSplits out;
    out.train = std::make_shared<TensorDataset>(images.narrow(0, 0, o.samples), y.narrow(0, 0, o.samples));
    out.test = std::make_shared<TensorDataset>(images.narrow(0, o.samples, o.test_samples),
                                               y.narrow(0, o.samples, o.test_samples));
    out.spec.input_shape = o.shape;
    out.spec.classes = o.classes;
    out.description = fmt::format("synthetic teacher task, {} train / {} test, shape {}, {} classes", o.samples,
                                  o.test_samples, shape_text(o.shape), o.classes);
    return out;
  }

 private:
  /// Windows of the successor chain: word t+1 is the successor of word t, or with
  /// probability label_noise a uniformly random word; targets are the windows shifted by one.
  DatasetSplits token_task() const {
    const auto& o = options_;
    const int64_t n = o.samples + o.test_samples, v = o.tokens.vocabulary, t = o.tokens.length;
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(o.seed));
    const at::Tensor successor = at::randperm(v, gen, at::kLong);
    at::Tensor words = at::empty({n, t + 1}, at::kLong);
    words.select(1, 0).copy_(at::randint(v, {n}, gen, at::kLong));
    for (int64_t k = 1; k <= t; ++k) {
      at::Tensor next = successor.index_select(0, words.select(1, k - 1));
      if (o.label_noise > 0) next = at::where(at::rand({n}, gen) < o.label_noise, at::randint(v, {n}, gen, at::kLong), next);
      words.select(1, k).copy_(next);
    }
    if (o.collate != Collate::Windows) return ragged(words, gen);
    const at::Tensor x = words.narrow(1, 0, t).contiguous(), y = words.narrow(1, 1, t).contiguous();
    DatasetSplits out;
    out.train = std::make_shared<TensorDataset>(x.narrow(0, 0, o.samples), y.narrow(0, 0, o.samples));
    out.test = std::make_shared<TensorDataset>(x.narrow(0, o.samples, o.test_samples), y.narrow(0, o.samples, o.test_samples));
    out.spec.input_shape = {t};
    out.spec.integer_input = true;
    out.spec.classes = v;
    out.spec.target_shape = {t};
    out.description = fmt::format("synthetic token task, {} train / {} test windows of {} words, vocabulary {}",
                                  o.samples, o.test_samples, t, v);
    return out;
  }

  /// Documents of min_length to length words (each the start of a window of the chain, and
  /// its next word), padded or packed.
  DatasetSplits ragged(const at::Tensor& words, at::Generator& gen) const {
    const auto& o = options_;
    const int64_t n = words.size(0), t = o.tokens.length, shortest = o.tokens.min_length > 0 ? o.tokens.min_length : t;
    const at::Tensor lengths = at::randint(shortest, t + 1, {n}, gen, at::kLong);
    std::vector<std::vector<int64_t>> documents[2];
    const at::Tensor rows = words.contiguous();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t* row = rows[i].data_ptr<int64_t>();
      documents[i < o.samples ? 0 : 1].emplace_back(row, row + lengths[i].item<int64_t>() + 1);
    }
    const auto train = std::make_shared<RaggedText>(documents[0], t, o.collate);
    const auto test = std::make_shared<RaggedText>(documents[1], t, o.collate);
    DatasetSplits out;
    out.train = train;
    out.test = test;
    out.spec.input_shape = {t};
    out.spec.integer_input = true;
    out.spec.classes = o.tokens.vocabulary;
    out.spec.target_shape = {t};
    out.spec.documents = true;
    out.description = fmt::format("synthetic token task, vocabulary {}; train: {}; test: {}", o.tokens.vocabulary,
                                  train->description(), test->description());
    return out;
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, Synthetic, "synthetic",
                 "deterministic learnable task: labels from a fixed random teacher network");

}  // namespace pipelab
