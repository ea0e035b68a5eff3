/// `transformer`: the Transformer encoder classifier of SpecTrain's IMDB experiments
/// (`src/sentiment_analysis/models/transformer/gpus=4_straight`, docs/schemes.md, "SpecTrain: models and
/// module-to-stage maps"), one block per SpecTrain module part:
///
/// - "embed": word embedding num_words x d_model (N(0, 1)), a linear d_model -> d_model
///   ("emb_ff") and a learned position term. The reference computes the position term as
///   nn.Linear(maxlen, d_model) applied to the one-hot matrix of the positions, i.e. row t of
///   its weight transposed plus its bias; we add weight^T + bias directly (the same numbers and
///   the same parameters, without a maxlen x maxlen matmul).
/// - "layer1" ... "layer<layers>": post-LN encoder layers, 4-head scaled dot-product
///   attention (q/k/v/joint linears d_model -> d_model), dropout, residual, LayerNorm
///   ("attention_norm"); then linear d_model -> ff -> ReLU -> linear ff -> d_model -> dropout,
///   residual, LayerNorm ("ff_norm"). No padding mask (docs/schemes.md, "Quirks") unless `padding_mask: true`.
/// - "head": mean over all maxlen positions, linear d_model -> classes ("output").
///
/// `padding_mask: true` (not in the reference) masks the padding (word id 0): "embed" also
/// writes the mask ([N, maxlen] bool, true for a word), every layer and the head read it
/// (core/model/block_io.h), so it travels with the hidden state across every stage
/// boundary, as a second tensor without a gradient. Attention then ignores padded keys and
/// the head averages over words only. The parameters are the same.
///
/// The residual quirk (docs/schemes.md, "SpecTrain: models and module-to-stage maps" and docs/schemes.md, "Quirks"):
/// the reference's second residual adds the layer's *input* x, not the attention sub-layer's output: ff_norm(ff(a) + x)
/// with a = attention_norm(dropout(attn(x)) + x). `ff_residual: input` (the default) keeps it,
/// because the brief for this model asks for the reference code's behaviour by default and
/// the published SpecTrain table (docs/schemes.md, "SpecTrain: published top-1 accuracy") was measured with it;
/// `ff_residual: attention` is the standard post-LN layer of Vaswani et al. 2017, ff_norm(ff(a) + a). Both have the
/// same parameters.
///
/// `head: lm` (not in the reference) makes it a causal language model, the setting of
/// Megatron-LM's GPT: attention sees only positions <= t, and "head" is a linear d_model ->
/// classes ("output") at every position, so the logits are [N, maxlen, classes] against a
/// dataset with a target per position (`imdb` with `task: lm`, or `tensors` with y
/// [N, maxlen]). `tie_embeddings: true` ties "head.output.weight" to the word embedding
/// "embed.embeddings.weight" (Press & Wolf 2017; Megatron's embedding group): the head's
/// copy starts equal to the embedding and the two gradients are summed before each update,
/// on one stage or across stages (core/model/model.h, TiedParameter).
///
/// Initialisation as the reference's `_initialize_weights`: every linear N(0, 0.01) with zero
/// bias (attention and position linears included), embedding N(0, 1) and LayerNorm (1, 0) as
/// PyTorch's defaults; `embedding_std` rescales the embedding (tied to the output
/// projection, N(0, 1) rows make logits of standard deviation ~sqrt(d_model)). The
/// reference's feed-forward width is its hidden size (its `ff_size` argument is unused),
/// hence ff = d_model = 128 by default.
///
/// Named splits. SpecTrain's four modules are stage0 = "embed", stage1 = "layer1", stage2 =
/// "layer2", stage3 = "layer3" + "head"; docs/schemes.md, "SpecTrain: models and module-to-stage maps"'s maps
/// [0,0,1,1,1] and [0,1,2,3,3] become spectrain_2 = [2, 3] and spectrain_4 = [1, 1, 1, 2] (defined when layers = 3).
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <limits>

#include "core/config/bounds.h"
#include "core/nn/document_layout.h"
#include "core/nn/dropout.h"
#include "core/nn/sequence_segment.h"
#include "models/blocks/containers.h"
#include "models/blocks/init.h"
#include "models/blocks/text.h"

namespace pipelab::models {
namespace {

enum class FfResidual { Input, Attention };
enum class Head { Classifier, Lm };

struct TransformerOptions {
  int64_t num_words = 10000;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t ff = 128;
  int64_t layers = 3;
  double dropout = 0.5;
  FfResidual ff_residual = FfResidual::Input;
  bool padding_mask = false;
  Head head = Head::Classifier;
  bool tie_embeddings = false;
  double embedding_std = 1;
  template <class V>
  void fields(V& v) {
    v("num_words", num_words, "vocabulary size of the embedding (at least the dataset's num_words)", width_bound());
    v("d_model", d_model, "embedding and hidden width", width_bound());
    v("heads", heads, "attention heads (must divide d_model)", width_bound());
    v("ff", ff, "hidden width of each feed-forward sub-layer (the reference uses d_model)", width_bound());
    v("layers", layers, "encoder layers", repeats_bound());
    v("dropout", dropout, "dropout after attention and after each feed-forward sub-layer", in_half_open(0, 1));
    v.choice("ff_residual", ff_residual,
             Choices<FfResidual>{{"input", FfResidual::Input}, {"attention", FfResidual::Attention}},
             "what the second residual adds: input = the layer's input (SpecTrain's code, "
             "docs/schemes.md, \"Quirks\"); attention = the attention sub-layer's output (standard post-LN)");
    v("padding_mask", padding_mask,
      "mask padding (word id 0) in attention and pooling; the mask travels with the hidden state between stages "
      "(the reference has none)");
    v.choice("head", head, Choices<Head>{{"classifier", Head::Classifier}, {"lm", Head::Lm}},
             "classifier = mean over positions, then classes (SpecTrain's); lm = causal attention and a "
             "prediction at every position (a language model; needs a target per position)");
    v("tie_embeddings", tie_embeddings,
      "head: lm only: the output projection is the word embedding (one tied weight, gradients summed)");
    v("embedding_std", embedding_std,
      "the word embedding starts N(0, embedding_std^2): 1 as PyTorch's default and SpecTrain's; GPT-2 and "
      "Megatron-LM use 0.02, which a tied output projection needs to start near uniform predictions",
      positive);
  }
  void check(const ConfigNode& node) const {
    if (d_model % heads != 0) {
      node.child("heads").fail(fmt::format("{} heads do not divide d_model = {}", heads, d_model),
                               "use a number of heads that divides d_model (e.g. 4 for 128)");
    }
    if (tie_embeddings && head != Head::Lm) {
      node.child("tie_embeddings").fail("ties the output projection to the embedding, but the classifier head has none",
                                        "set head: lm, or leave tie_embeddings out");
    }
    if (padding_mask && head == Head::Lm) {
      node.child("padding_mask").fail("a language model's windows are all words: there is no padding to mask",
                                      "leave padding_mask out with head: lm");
    }
  }
};

/// Word embedding -> linear -> + learned position term (SpecTrain's stage0).
class TextEmbedImpl : public torch::nn::Module {
 public:
  TextEmbedImpl(int64_t num_words, int64_t d_model, int64_t maxlen, double std) {
    embed_ = register_module("embeddings", TokenEmbedding(num_words, d_model));
    if (std != 1) {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& w : embed_->parameters()) w.mul_(std);
    }
    emb_ff_ = register_module("emb_ff", torch::nn::Linear(d_model, d_model));
    pos_ = register_module("pos", torch::nn::Linear(maxlen, d_model));
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    // pos(one_hot(t)) = pos.weight[:, t] + pos.bias, for every position t at once; a
    // sequence segment's tokens (core/nn/sequence_segment.h) sit at its offset.
    torch::Tensor positions = pos_->weight.t();
    const nn::SequenceSegment* segment = nn::current_segment();
    const int64_t offset = segment ? segment->offset : 0;
    if (const torch::Tensor restarting = nn::document_positions(offset, ids.size(1)); restarting.defined()) {
      // Ragged text: positions count from each document's start ([N, T, d]).
      positions = positions.index_select(0, restarting.flatten()).view({ids.size(0), ids.size(1), -1});
    } else {
      positions = positions.narrow(0, offset, ids.size(1));  // a segment's, or a shorter sequence's
    }
    return emb_ff_(embed_(ids)) + (positions + pos_->bias);
  }

 private:
  TokenEmbedding embed_{nullptr};
  torch::nn::Linear emb_ff_{nullptr}, pos_{nullptr};
};
TORCH_MODULE(TextEmbed);

/// The same embedding, also returning the padding mask: {hidden, ids != 0}.
class MaskedTextEmbedImpl : public TextEmbedImpl {
 public:
  using TextEmbedImpl::TextEmbedImpl;
  std::vector<torch::Tensor> forward(const torch::Tensor& ids) { return {TextEmbedImpl::forward(ids), ids.ne(0)}; }
};
TORCH_MODULE(MaskedTextEmbed);

/// Multi-head scaled dot-product self-attention with q/k/v/joint projections.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(int64_t d_model, int64_t heads, bool causal) : heads_(heads), causal_(causal) {
    q_ = register_module("q_linear", torch::nn::Linear(d_model, d_model));
    k_ = register_module("k_linear", torch::nn::Linear(d_model, d_model));
    v_ = register_module("v_linear", torch::nn::Linear(d_model, d_model));
    joint_ = register_module("joint_linear", torch::nn::Linear(d_model, d_model));
  }
  /// `mask` ([N, T] bool, optional): the keys to attend to.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask = {}) {
    const int64_t n = x.size(0), t = x.size(1), d = x.size(2), head = d / heads_;
    const auto split = [&](const torch::Tensor& y) { return y.view({n, t, heads_, head}).transpose(1, 2); };
    const torch::Tensor q = split(q_(x));
    torch::Tensor k = split(k_(x)), v = split(v_(x));
    if (causal_) {
      // Computing one segment of the sequences: its queries also see the earlier segments'
      // keys and values, kept (with their gradients' way back) by the cache.
      std::vector<torch::Tensor> kv = segments_.extend({k, v}, 2);
      k = kv[0];
      v = kv[1];
    }
    const int64_t keys = k.size(2), before = keys - t;  // keys of the earlier segments
    torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(double(head));
    if (mask.defined()) scores = scores.masked_fill(mask.logical_not().view({n, 1, 1, t}), lowest_score(scores.scalar_type()));
    if (causal_) {
      // Position i sees keys j <= i only (a language model must not read the word it predicts),
      // and of its own document only where the text is ragged.
      scores = scores.masked_fill(nn::causal_blocked_keys(before, t, x.options()), lowest_score(scores.scalar_type()));
    }
    const torch::Tensor weights = torch::softmax(scores, -1);
    return joint_(torch::matmul(weights, v).transpose(1, 2).contiguous().view({n, t, d}));
  }

 private:
  int64_t heads_;
  bool causal_;
  nn::SegmentCache segments_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, joint_{nullptr};
};
TORCH_MODULE(SelfAttention);

/// One post-LN encoder layer (SpecTrain's `Block`), with the residual choice above.
class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const TransformerOptions& o) : residual_input_(o.ff_residual == FfResidual::Input) {
    attention_ = register_module("attention", SelfAttention(o.d_model, o.heads, o.head == Head::Lm));
    attention_norm_ = register_module("attention_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})));
    ff_ = register_module("ff", Sequence());
    ff_->add("0", torch::nn::Linear(o.d_model, o.ff)).add("1", torch::nn::ReLU()).add("2", torch::nn::Linear(o.ff, o.d_model));
    if (o.dropout > 0) {
      attention_dropout_ = register_module("attention_dropout", nn::Dropout(o.dropout));
      ff_->add("3", nn::Dropout(o.dropout));
    }
    ff_norm_ = register_module("ff_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})));
  }
  torch::Tensor forward(const torch::Tensor& x) { return layer(x, {}); }

 protected:
  torch::Tensor layer(const torch::Tensor& x, const torch::Tensor& mask) {
    torch::Tensor a = attention_(x, mask);
    if (attention_dropout_) a = attention_dropout_(a);
    const torch::Tensor attended = attention_norm_(a + x);
    return ff_norm_(ff_(attended) + (residual_input_ ? x : attended));
  }

 private:
  bool residual_input_;
  SelfAttention attention_{nullptr};
  torch::nn::LayerNorm attention_norm_{nullptr}, ff_norm_{nullptr};
  Sequence ff_{nullptr};
  nn::Dropout attention_dropout_{nullptr};
};
TORCH_MODULE(EncoderLayer);

/// The same layer reading the padding mask too.
class MaskedEncoderLayerImpl : public EncoderLayerImpl {
 public:
  using EncoderLayerImpl::EncoderLayerImpl;
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) { return layer(x, mask); }
};
TORCH_MODULE(MaskedEncoderLayer);

class Transformer : public Configured<ModelFactory, TransformerOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    // Two heads of 8: every layer stays, so the plan's cut and stages do too.
    Miniature m;
    if (options_.d_model > 16) {
      m.widths["d_model"] = 16;
      m.widths["heads"] = 2;
    }
    if (options_.ff > 32) m.widths["ff"] = 32;
    if (options_.num_words > 64) m.vocabulary["num_words"] = 64;
    return m;
  }
  bool ties_weights() const override { return options_.tie_embeddings; }
  /// The causal language model reads ragged text's documents (attention and positions).
  bool reads_documents() const override { return options_.head == Head::Lm; }
  /// The causal language model computes a sequence segment by segment (each layer's
  /// attention keeps the earlier segments' keys and values). Per token and layer it spends
  /// 4 d^2 multiply-adds on the q/k/v/joint projections and 2 d ff on the feed-forward, and
  /// 2 d on each key it attends to (the score and the weighted value): 2 d + ff keys' worth.
  std::optional<double> segment_token_work() const override {
    if (options_.head != Head::Lm) return std::nullopt;
    return static_cast<double>(2 * options_.d_model + options_.ff);
  }
  ModelDef define(const DataSpec& data) const override {
    const int64_t maxlen = text_input(*this, data), classes = data.classes;
    check_targets(data, maxlen);
    const TransformerOptions o = options_;
    ModelDef def;
    if (o.padding_mask) {
      const BlockIO with_mask = reads({"x", "mask"});
      def.blocks.push_back({"embed",
                            [=] {
                              return initialised(MaskedTextEmbed(o.num_words, o.d_model, maxlen, o.embedding_std),
                                                 init_spectrain);
                            },
                            reads({"x"}, {"x", "mask"})});
      for (int64_t i = 1; i <= o.layers; ++i) {
        def.blocks.push_back(
            {fmt::format("layer{}", i), [=] { return initialised(MaskedEncoderLayer(o), init_spectrain); }, with_mask});
        def.blocks.back().shape_key = "layer";
      }
      def.blocks.push_back(
          {"head", [=] { return initialised(MaskedMeanPoolClassifier(o.d_model, classes), init_spectrain); }, with_mask});
    } else {
      def.blocks.push_back(
          {"embed", [=] {
             return initialised(TextEmbed(o.num_words, o.d_model, maxlen, o.embedding_std), init_spectrain);
           }});
      for (int64_t i = 1; i <= o.layers; ++i) {
        def.blocks.push_back({fmt::format("layer{}", i), [=] { return initialised(EncoderLayer(o), init_spectrain); }});
        def.blocks.back().shape_key = "layer";
      }
      if (o.head == Head::Lm) {
        def.blocks.push_back(
            {"head", [=] { return initialised(PositionClassifier(o.d_model, classes), init_spectrain); }});
      } else {
        def.blocks.push_back(
            {"head", [=] { return initialised(MeanPoolClassifier(o.d_model, classes), init_spectrain); }});
      }
    }
    if (o.tie_embeddings) def.ties.push_back({"embed.embeddings.weight", "head.output.weight"});
    def.loss = std::make_shared<CrossEntropyLoss>();
    if (o.layers == 3) def.named_balances = {{"spectrain_2", {2, 3}}, {"spectrain_4", {1, 1, 1, 2}}};
    return def;
  }

 private:
  /// The head must match the targets: one class per example, or (head: lm) one per
  /// position; a tied projection must span the embedding's vocabulary.
  void check_targets(const DataSpec& data, int64_t maxlen) const {
    const bool per_position = !data.target_shape.empty();
    if (options_.head == Head::Lm && data.target_shape != std::vector<int64_t>{maxlen}) {
      fail("head", fmt::format("head: lm predicts a word at each of the {} positions, but the dataset has {}", maxlen,
                               per_position ? "targets of shape " + shape_text(data.target_shape)
                                            : std::string("one label per example")),
           "use a language-modelling dataset (imdb with task: lm, or tensors with y of shape [N, maxlen])");
    }
    if (options_.head == Head::Classifier && per_position) {
      fail("head", fmt::format("the classifier head predicts one label per example, but the dataset has a target "
                               "per position (shape {})",
                               shape_text(data.target_shape)),
           "set head: lm");
    }
    if (options_.tie_embeddings && data.classes != options_.num_words) {
      fail("tie_embeddings",
           fmt::format("the output projection predicts {} words and the embedding has {}: a tied weight needs one "
                       "vocabulary",
                       data.classes, options_.num_words),
           fmt::format("set model.num_words to {} (the dataset's vocabulary)", data.classes));
    }
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Transformer, "transformer",
                 "Transformer encoder classifier for word ids (SpecTrain's IMDB model): embed, layers, head");
}
