/// `llama`: a Llama-family decoder (Touvron et al. 2023; the block Megatron-Core, torchtitan,
/// Seq1F1B, ZB and DualPipe train), laid out as Hugging Face's LlamaForCausalLM computes it,
/// so that its checkpoints (`model.safetensors`) load with `init.names: huggingface` and give
/// its logits (tests/models/llama_model_test.cpp: a random transformers model's logits and 3
/// AdamW steps of a 2-stage GPipe, float64, to 1e-10). Blocks: "embed" (the token
/// embedding), "layer0".."layer<L-1>" (pre-norm decoder layers: RMSNorm, causal self-attention
/// with rotary positions and grouped-query heads, residual; RMSNorm, SwiGLU feed-forward,
/// residual), "head" (the final RMSNorm and the projection to the vocabulary).
///
/// Numerics as the reference computes them in float32 and bfloat16: the rotary angles are
/// computed in float32 whatever the model's dtype (Hugging Face's LlamaRotaryEmbedding and
/// Meta's precompute_freqs_cis both do); RMSNorm and the attention softmax run in float32 for
/// a narrower dtype. A float64 model computes them in float64, where Hugging Face casts down
/// to float32 (a cast meant for half precision; the test lifts it on the reference's side).
///
/// A sequence segment (Seq1F1B, TeraPipe; core/nn/sequence_segment.h) rotates its tokens at
/// their offset in the sequence, and its queries also read the earlier segments' keys and
/// values. Initial weights as Hugging Face's _init_weights: N(0, init_std) linears and
/// embedding, unit norms.
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <limits>

#include "core/config/bounds.h"
#include "core/model/model.h"
#include "core/nn/document_layout.h"
#include "core/nn/sequence_segment.h"
#include "models/blocks/text.h"

// A namespace of its own: a unity build compiles it with transformer.cpp and roberta.cpp.
namespace pipelab::models::llama {
namespace {

struct LlamaOptions {
  // Llama-2-7B's shape.
  int64_t vocab = 32000, hidden = 4096, layers = 32, heads = 32, kv_heads = 32, intermediate = 11008;
  double rope_theta = 10000, norm_eps = 1e-5, init_std = 0.02;
  bool tie_embeddings = false;
  template <class V>
  void fields(V& v) {
    v("vocab", vocab, "vocabulary size (Llama-2: 32000)", width_bound());
    v("hidden", hidden, "hidden size (Llama-2-7B: 4096)", width_bound());
    v("layers", layers, "decoder layers (Llama-2-7B: 32)", repeats_bound());
    v("heads", heads, "query heads (Llama-2-7B: 32)", width_bound());
    v("kv_heads", kv_heads, "key and value heads, dividing heads (grouped-query attention; = heads: multi-head)",
      width_bound());
    v("intermediate", intermediate, "SwiGLU feed-forward width (Llama-2-7B: 11008)", width_bound());
    v("rope_theta", rope_theta, "rotary base (Llama-2: 10000, Llama-3: 500000)", positive);
    v("norm_eps", norm_eps, "RMSNorm epsilon (Llama-2: 1e-5)", positive);
    v("tie_embeddings", tie_embeddings, "the output projection is the token embedding (one tied weight)");
    v("init_std", init_std, "std of the initial linear and embedding weights", positive);
  }
  void check(const ConfigNode& node) const {
    if (hidden % heads != 0) {
      node.child("heads").fail(fmt::format("{} heads do not divide the hidden size {}", heads, hidden),
                               "use a divisor of hidden");
    }
    if (heads % kv_heads != 0) {
      node.child("kv_heads").fail(fmt::format("{} key/value heads do not divide the {} query heads", kv_heads, heads),
                                  "use a divisor of heads (heads for multi-head attention, 1 for multi-query)");
    }
    if (hidden % heads == 0 && (hidden / heads) % 2 != 0) {
      node.child("heads").fail(fmt::format("rotary positions rotate pairs of dimensions, but a head has {} (hidden "
                                           "{} / {} heads)",
                                           hidden / heads, hidden, heads),
                               "choose heads so that hidden / heads is even");
    }
  }
  int64_t head_dim() const { return hidden / heads; }
};

/// `t` in at least float32 (where a narrower dtype would lose the sum).
at::Tensor widened(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
}

/// LlamaRMSNorm: x / sqrt(mean(x^2) + eps), times a learned scale ("weight").
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps) : eps_(eps) { weight_ = register_parameter("weight", at::ones({dim})); }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = widened(x);
    return weight_ * (h * at::rsqrt(h.pow(2).mean(-1, true) + eps_)).to(x.scalar_type());
  }

 private:
  double eps_;
  at::Tensor weight_;
};
TORCH_MODULE(RmsNorm);

/// The rotary tables of `positions` (int64, any shape P): cos and sin [P..., head_dim],
/// computed in float32 as the references do, then in `dtype`.
std::pair<at::Tensor, at::Tensor> rotary(const at::Tensor& positions, int64_t dim, double theta,
                                         const at::TensorOptions& options) {
  const at::Tensor inv_freq =
      1.0 / at::pow(theta, at::arange(0, dim, 2, options.dtype(at::kLong)).to(at::kFloat) / dim);
  const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  return {angles.cos().to(options.dtype()), angles.sin().to(options.dtype())};
}

/// x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] of x's two halves.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

/// LlamaAttention: "q_proj", "k_proj", "v_proj", "o_proj" (no biases), causal, rotary,
/// each key/value head shared by heads / kv_heads query heads.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const LlamaOptions& o) : o_(o) {
    const int64_t d = o.hidden, kv = o.kv_heads * o.head_dim();
    const auto linear = [](int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); };
    q_ = register_module("q_proj", linear(d, d));
    k_ = register_module("k_proj", linear(d, kv));
    v_ = register_module("v_proj", linear(d, kv));
    o_proj_ = register_module("o_proj", linear(d, d));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t n = x.size(0), t = x.size(1), hd = o_.head_dim();
    const auto split = [&](const at::Tensor& y, int64_t heads) { return y.view({n, t, heads, hd}).transpose(1, 2); };
    const nn::SequenceSegment* segment = nn::current_segment();
    const int64_t offset = segment ? segment->offset : 0;
    // Ragged text: positions count from each document's start ([N, 1, t, hd] tables); fixed
    // windows share one table [t, hd].
    const at::Tensor restarting = nn::document_positions(offset, t);
    const at::Tensor positions = restarting.defined() ? restarting.unsqueeze(1)
                                                      : at::arange(offset, offset + t, x.options().dtype(at::kLong));
    const auto [cos, sin] = rotary(positions, hd, o_.rope_theta, x.options());
    const at::Tensor q = rotate(split(q_(x), o_.heads), cos, sin);
    // A segment's queries also see the earlier segments' keys and values (rotated at theirs).
    const std::vector<at::Tensor> kv =
        segments_.extend({rotate(split(k_(x), o_.kv_heads), cos, sin), split(v_(x), o_.kv_heads)}, 2);
    const int64_t groups = o_.heads / o_.kv_heads;
    const at::Tensor k = groups == 1 ? kv[0] : kv[0].repeat_interleave(groups, 1);
    const at::Tensor v = groups == 1 ? kv[1] : kv[1].repeat_interleave(groups, 1);
    const int64_t keys = k.size(2), before = keys - t;
    at::Tensor scores = at::matmul(q, k.transpose(2, 3)) * std::pow(static_cast<double>(hd), -0.5);
    // A query sees its own and earlier tokens, of its own document where the text is ragged.
    scores = scores.masked_fill(nn::causal_blocked_keys(before, t, x.options()), -std::numeric_limits<double>::infinity());
    const at::Tensor weights = at::softmax(widened(scores), -1).to(x.scalar_type());
    return o_proj_(at::matmul(weights, v).transpose(1, 2).contiguous().view({n, t, o_.hidden}));
  }

 private:
  LlamaOptions o_;
  nn::SegmentCache segments_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_proj_{nullptr};
};
TORCH_MODULE(Attention);

/// LlamaMLP: down(silu(gate(x)) * up(x)).
class SwiGluImpl : public torch::nn::Module {
 public:
  explicit SwiGluImpl(const LlamaOptions& o) {
    const auto linear = [](int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); };
    gate_ = register_module("gate_proj", linear(o.hidden, o.intermediate));
    up_ = register_module("up_proj", linear(o.hidden, o.intermediate));
    down_ = register_module("down_proj", linear(o.intermediate, o.hidden));
  }
  at::Tensor forward(const at::Tensor& x) { return down_(at::silu(gate_(x)) * up_(x)); }

 private:
  torch::nn::Linear gate_{nullptr}, up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(SwiGlu);

/// LlamaDecoderLayer: h = x + attn(norm(x)); out = h + mlp(norm(h)).
class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const LlamaOptions& o) {
    input_norm_ = register_module("input_layernorm", RmsNorm(o.hidden, o.norm_eps));
    attention_ = register_module("self_attn", Attention(o));
    post_norm_ = register_module("post_attention_layernorm", RmsNorm(o.hidden, o.norm_eps));
    mlp_ = register_module("mlp", SwiGlu(o));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = x + attention_(input_norm_(x));
    return h + mlp_(post_norm_(h));
  }

 private:
  RmsNorm input_norm_{nullptr}, post_norm_{nullptr};
  Attention attention_{nullptr};
  SwiGlu mlp_{nullptr};
};
TORCH_MODULE(DecoderLayer);

/// "embed_tokens": the token embedding (a clear error for an id outside the vocabulary).
class EmbedImpl : public torch::nn::Module {
 public:
  explicit EmbedImpl(const LlamaOptions& o) { tokens_ = register_module("embed_tokens", TokenEmbedding(o.vocab, o.hidden)); }
  at::Tensor forward(const at::Tensor& ids) { return tokens_(ids); }

 private:
  TokenEmbedding tokens_{nullptr};
};
TORCH_MODULE(Embed);

/// The final "norm" and "lm_head": logits [N, T, vocab].
class HeadImpl : public torch::nn::Module {
 public:
  explicit HeadImpl(const LlamaOptions& o) {
    norm_ = register_module("norm", RmsNorm(o.hidden, o.norm_eps));
    lm_head_ = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(o.hidden, o.vocab).bias(false)));
  }
  at::Tensor forward(const at::Tensor& x) { return lm_head_(norm_(x)); }

 private:
  RmsNorm norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
};
TORCH_MODULE(Head);

/// `module` with Hugging Face's initial weights: every 2-D weight (linears, the embedding)
/// N(0, std); the norms keep their ones.
template <class M>
torch::nn::AnyModule hf_initialised(M module, double std) {
  at::NoGradGuard no_grad;
  for (auto& p : module->named_parameters()) {
    if (p.value().dim() == 2) p.value().normal_(0, std);
  }
  return torch::nn::AnyModule(module);
}

class Llama : public Configured<ModelFactory, LlamaOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    // Two query heads of 8 (an even head dimension, as the rotation needs) over one key/value
    // head where the file groups them, two where it does not.
    Miniature m;
    const LlamaOptions& o = options_;
    if (o.hidden > 16) {
      m.widths["hidden"] = 16;
      m.widths["heads"] = 2;
      m.widths["kv_heads"] = o.kv_heads == o.heads ? 2 : 1;
    }
    if (o.intermediate > 32) m.widths["intermediate"] = 32;
    if (o.vocab > 64) m.vocabulary["vocab"] = 64;
    return m;
  }
  bool ties_weights() const override { return options_.tie_embeddings; }
  bool reads_documents() const override { return true; }
  /// Per token and layer: the q/k/v/o projections, (2 d + 2 kv) d multiply-adds, and the
  /// SwiGLU's 3 d ff; each key attended costs 2 d (the score and the weighted value over
  /// every head). In keys' worth: d + kv + 1.5 ff.
  std::optional<double> segment_token_work() const override {
    const LlamaOptions& o = options_;
    return static_cast<double>(o.hidden + o.kv_heads * o.head_dim()) + 1.5 * static_cast<double>(o.intermediate);
  }
  ModelDef define(const DataSpec& data) const override {
    const int64_t length = text_input(*this, data);
    if (data.target_shape != std::vector<int64_t>{length}) {
      fail("type", fmt::format("a causal language model predicts a token at each of the {} positions, but the dataset "
                               "has {}",
                               length,
                               data.target_shape.empty() ? std::string("one label per example")
                                                         : "targets of shape " + shape_text(data.target_shape)),
           "use a language-modelling dataset (imdb with task: lm, or tensors with y of shape [N, length])");
    }
    if (data.classes > options_.vocab) {
      fail("vocab", fmt::format("the head predicts {} tokens, but the dataset's targets have {} classes", options_.vocab,
                                data.classes),
           fmt::format("set model.vocab to {} or more", data.classes));
    }
    const LlamaOptions o = options_;
    ModelDef def;
    def.blocks.push_back({"embed", [o] { return hf_initialised(Embed(o), o.init_std); }});
    for (int64_t i = 0; i < o.layers; ++i) {
      def.blocks.push_back({fmt::format("layer{}", i), [o] { return hf_initialised(DecoderLayer(o), o.init_std); }});
      def.blocks.back().shape_key = "layer";
    }
    def.blocks.push_back({"head", [o] { return hf_initialised(Head(o), o.init_std); }});
    if (o.tie_embeddings) def.ties.push_back({"embed.embed_tokens.weight", "head.lm_head.weight"});
    def.loss = std::make_shared<CrossEntropyLoss>();
    // LlamaForCausalLM's names. A tied checkpoint may hold lm_head.weight or not: the load
    // fills the head from the embedding (RunBuilder::load_initial_weights). Older files keep a
    // rotary table per layer (self_attn.rotary_emb.inv_freq), which the model computes.
    def.published_names["huggingface"] = {{R"(model\.embed_tokens\.(.*))", R"(embed.embed_tokens.\1)"},
                                          {R"(model\.layers\.\d+\.self_attn\.rotary_emb\..*)", ""},
                                          {R"(model\.layers\.(\d+)\.(.*))", R"(layer\1.\2)"},
                                          {R"(model\.norm\.(.*))", R"(head.norm.\1)"},
                                          {R"(lm_head\.(.*))", R"(head.lm_head.\1)"},
                                          {R"(model\.rotary_emb\..*)", ""}};
    return def;
  }
};

}  // namespace

PIPELAB_REGISTER(ModelFactory, Llama, "llama",
                 "Llama-family causal decoder (RMSNorm, rotary positions, SwiGLU, grouped-query attention), named as "
                 "Hugging Face's LlamaForCausalLM");

}  // namespace pipelab::models::llama
