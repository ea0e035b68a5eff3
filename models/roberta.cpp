/// `roberta`: RoBERTa for sequence classification (Liu et al. 2019, "RoBERTa: A Robustly
/// Optimized BERT Pretraining Approach"), laid out as Hugging Face's
/// RobertaForSequenceClassification computes it, so that its published checkpoints
/// (`pytorch_model.bin`, `model.safetensors`) load with `init.names: huggingface` and give its
/// logits — gpipe_test's NLP rows fine-tune roberta-base on RTE. Blocks: "embeddings" (word +
/// position + token-type embeddings, LayerNorm, dropout; it also writes the padding mask),
/// "layer0".."layer<L-1>" (post-LN encoder layers: self-attention over the unpadded keys,
/// dense + LayerNorm, GELU feed-forward, dense + LayerNorm), "classifier" (the <s> token's
/// state: dropout, dense, tanh, dropout, dense to the classes).
///
/// Position ids are Hugging Face's create_position_ids_from_input_ids: padding_idx + the
/// running count of non-padding tokens (padding keeps padding_idx). Initial weights are its
/// _init_weights': N(0, 0.02) linears and embeddings (the padding row 0), zero biases, unit
/// LayerNorms. Dropout is pipelab's (masks every executor repeats).
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <limits>

#include "core/config/bounds.h"
#include "core/model/model.h"
#include "core/nn/dropout.h"
#include "models/blocks/text.h"

// A namespace of its own: its layer classes share names with transformer.cpp's, and a unity
// build compiles the two files as one.
namespace pipelab::models::roberta {
namespace {

struct RobertaOptions {
  int64_t vocab = 50265, hidden = 768, layers = 12, heads = 12, intermediate = 3072, max_positions = 514;
  int64_t type_vocab = 1, pad_id = 1;
  double dropout = 0.1, attention_dropout = 0.1, eps = 1e-5, init_std = 0.02;
  template <class V>
  void fields(V& v) {
    v("vocab", vocab, "vocabulary size (roberta-base: 50265)", width_bound());
    v("hidden", hidden, "hidden size (roberta-base: 768)", width_bound());
    v("layers", layers, "encoder layers (roberta-base: 12)", repeats_bound());
    v("heads", heads, "attention heads (roberta-base: 12)", width_bound());
    v("intermediate", intermediate, "feed-forward width (roberta-base: 3072)", width_bound());
    v("max_positions", max_positions, "position embeddings (roberta-base: 514 = 512 + padding_idx + 1)", width_bound());
    v("type_vocab", type_vocab, "token-type embeddings (roberta-base: 1)", width_bound());
    v("pad_id", pad_id, "the padding token's id (roberta-base: 1)", non_negative);
    v("dropout", dropout, "hidden dropout", in_half_open(0.0, 1.0));
    v("attention_dropout", attention_dropout, "dropout on the attention weights", in_half_open(0.0, 1.0));
    v("eps", eps, "LayerNorm epsilon", positive);
    v("init_std", init_std, "std of the initial linear and embedding weights", positive);
  }
  void check(const ConfigNode& node) const {
    if (hidden % heads != 0) {
      node.child("heads").fail(fmt::format("{} heads do not divide the hidden size {}", heads, hidden),
                               "use a divisor of hidden");
    }
    if (pad_id >= vocab) node.child("pad_id").fail("it is not an id of the vocabulary", "use an id below vocab");
  }
};

torch::nn::LayerNorm layer_norm(const RobertaOptions& o) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden}).eps(o.eps));
}

/// RobertaEmbeddings; returns {hidden states, mask (true for a token)}.
class EmbeddingsImpl : public torch::nn::Module {
 public:
  explicit EmbeddingsImpl(const RobertaOptions& o) : pad_(o.pad_id) {
    word_ = register_module("word_embeddings", torch::nn::Embedding(o.vocab, o.hidden));
    position_ = register_module("position_embeddings", torch::nn::Embedding(o.max_positions, o.hidden));
    type_ = register_module("token_type_embeddings", torch::nn::Embedding(o.type_vocab, o.hidden));
    norm_ = register_module("LayerNorm", layer_norm(o));
    dropout_ = register_module("dropout", nn::Dropout(o.dropout));
  }
  std::vector<at::Tensor> forward(const at::Tensor& ids) {
    const at::Tensor mask = ids.ne(pad_);
    const at::Tensor positions = mask.to(at::kLong).cumsum(1) * mask.to(at::kLong) + pad_;
    at::Tensor h = word_(ids) + type_(at::zeros_like(ids)) + position_(positions);
    return {dropout_(norm_(h)), mask};
  }

 private:
  int64_t pad_;
  torch::nn::Embedding word_{nullptr}, position_{nullptr}, type_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Embeddings);

/// A dense layer, dropout, and LayerNorm over it plus the residual (RobertaSelfOutput,
/// RobertaOutput).
class DenseNormImpl : public torch::nn::Module {
 public:
  DenseNormImpl(int64_t in, const RobertaOptions& o) {
    dense_ = register_module("dense", torch::nn::Linear(in, o.hidden));
    norm_ = register_module("LayerNorm", layer_norm(o));
    dropout_ = register_module("dropout", nn::Dropout(o.dropout));
  }
  at::Tensor forward(const at::Tensor& h, const at::Tensor& residual) { return norm_(dropout_(dense_(h)) + residual); }

 private:
  torch::nn::Linear dense_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(DenseNorm);

/// RobertaSelfAttention: "query", "key", "value", scores over the keys that are tokens.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  explicit SelfAttentionImpl(const RobertaOptions& o) : heads_(o.heads) {
    q_ = register_module("query", torch::nn::Linear(o.hidden, o.hidden));
    k_ = register_module("key", torch::nn::Linear(o.hidden, o.hidden));
    v_ = register_module("value", torch::nn::Linear(o.hidden, o.hidden));
    dropout_ = register_module("dropout", nn::Dropout(o.attention_dropout));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const int64_t n = x.size(0), t = x.size(1), d = x.size(2), head = d / heads_;
    const auto split = [&](const at::Tensor& y) { return y.view({n, t, heads_, head}).transpose(1, 2); };
    at::Tensor scores = at::matmul(split(q_(x)), split(k_(x)).transpose(2, 3)) / std::sqrt(static_cast<double>(head));
    // Hugging Face adds the dtype's lowest value at padded keys; filling with it is the same.
    scores = scores.masked_fill(mask.logical_not().view({n, 1, 1, t}), lowest_score(scores.scalar_type()));
    const at::Tensor weights = dropout_(at::softmax(scores, -1));
    return at::matmul(weights, split(v_(x))).transpose(1, 2).contiguous().view({n, t, d});
  }

 private:
  int64_t heads_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr};
  nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(SelfAttention);

/// RobertaLayer: attention.{self, output}, intermediate.dense, output.{dense, LayerNorm}.
class LayerImpl : public torch::nn::Module {
 public:
  explicit LayerImpl(const RobertaOptions& o) {
    auto attention = register_module("attention", std::make_shared<torch::nn::Module>());
    self_ = attention->register_module("self", SelfAttention(o));
    attention_out_ = attention->register_module("output", DenseNorm(o.hidden, o));
    auto intermediate = register_module("intermediate", std::make_shared<torch::nn::Module>());
    intermediate_ = intermediate->register_module("dense", torch::nn::Linear(o.hidden, o.intermediate));
    out_ = register_module("output", DenseNorm(o.intermediate, o));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const at::Tensor a = attention_out_(self_(x, mask), x);
    return out_(gelu_(intermediate_(a)), a);
  }

 private:
  SelfAttention self_{nullptr};
  DenseNorm attention_out_{nullptr}, out_{nullptr};
  torch::nn::Linear intermediate_{nullptr};
  torch::nn::GELU gelu_;
};
TORCH_MODULE(Layer);

/// RobertaClassificationHead on the first token's state.
class ClassifierImpl : public torch::nn::Module {
 public:
  ClassifierImpl(const RobertaOptions& o, int64_t classes) {
    dense_ = register_module("dense", torch::nn::Linear(o.hidden, o.hidden));
    out_ = register_module("out_proj", torch::nn::Linear(o.hidden, classes));
    dropout_ = register_module("dropout", nn::Dropout(o.dropout));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& /*mask*/) {
    return out_(dropout_(at::tanh(dense_(dropout_(x.select(1, 0))))));
  }

 private:
  torch::nn::Linear dense_{nullptr}, out_{nullptr};
  nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Classifier);

/// Hugging Face's _init_weights for RoBERTa.
template <class M>
torch::nn::AnyModule hf_initialised(M module, const RobertaOptions& o) {
  at::NoGradGuard no_grad;
  module->apply([&](torch::nn::Module& m) {
    if (auto* linear = m.as<torch::nn::Linear>()) {
      linear->weight.normal_(0, o.init_std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = m.as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0, o.init_std);
    } else if (auto* norm = m.as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1);
      norm->bias.zero_();
    }
  });
  return torch::nn::AnyModule(module);
}

class Roberta : public Configured<ModelFactory, RobertaOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    if (options_.hidden > 16) {
      m.widths["hidden"] = 16;
      m.widths["heads"] = 2;
    }
    if (options_.intermediate > 32) m.widths["intermediate"] = 32;
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    if (!data.integer_input || data.input_shape.size() != 1 || !data.target_shape.empty()) {
      fail("type", fmt::format("RoBERTa classifies token-id sequences [T], but the dataset gives {}{}",
                               shape_text(data.input_shape), data.integer_input ? " token ids" : " features"),
           "use a text dataset (glue with tokenizer: bpe)");
    }
    const int64_t length = data.input_shape[0];
    if (length + options_.pad_id + 1 > options_.max_positions) {
      fail("max_positions", fmt::format("sequences of {} tokens need {} positions", length, length + options_.pad_id + 1),
           fmt::format("use maxlen <= {} or more positions", options_.max_positions - options_.pad_id - 1));
    }
    const RobertaOptions o = options_;
    const int64_t classes = data.classes;
    ModelDef def;
    def.blocks.push_back({"embeddings",
                          [o] {
                            Embeddings e(o);
                            auto any = hf_initialised(e, o);
                            // Hugging Face zeroes the padding row after drawing it.
                            at::NoGradGuard no_grad;
                            e->named_parameters()["word_embeddings.weight"][o.pad_id].zero_();
                            return any;
                          },
                          reads({"x"}, {"x", "mask"})});
    for (int64_t i = 0; i < o.layers; ++i) {
      def.blocks.push_back({fmt::format("layer{}", i), [o] { return hf_initialised(Layer(o), o); }, reads({"x", "mask"})});
      def.blocks.back().shape_key = "layer";
    }
    def.blocks.push_back(
        {"classifier", [o, classes] { return hf_initialised(Classifier(o, classes), o); }, reads({"x", "mask"})});
    def.loss = std::make_shared<CrossEntropyLoss>();
    // RobertaForSequenceClassification's names; a pre-trained roberta-base checkpoint also
    // holds the pooler and the masked-LM head, which this model has no use for.
    def.published_names["huggingface"] = {{R"(roberta\.embeddings\.position_ids)", ""},
                                          {R"(roberta\.embeddings\.(.*))", R"(embeddings.\1)"},
                                          {R"(roberta\.encoder\.layer\.(\d+)\.(.*))", R"(layer\1.\2)"},
                                          {R"(roberta\.pooler\..*)", ""},
                                          {R"(lm_head\..*)", ""},
                                          {R"(classifier\.(.*))", R"(classifier.\1)"}};
    return def;
  }
};

}  // namespace

PIPELAB_REGISTER(ModelFactory, Roberta, "roberta",
                 "RoBERTa for sequence classification, named as Hugging Face's RobertaForSequenceClassification");

}  // namespace pipelab::models::roberta
