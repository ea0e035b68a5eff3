/// `residual_lstm`: the residual LSTM classifier of SpecTrain's IMDB experiments
/// (`src/sentiment_analysis/models/residual_lstm/gpus=4_straight`, docs/schemes.md
/// docs/schemes.md, "SpecTrain: models and module-to-stage maps"), one block per part:
///
/// - "embed": word embedding num_words x d_model (N(0, 1), PyTorch's default);
/// - "lstm1" ... "lstm<layers>": x + projection_matrix(LSTM(x)), a one-layer LSTM d_model ->
///   hidden (batch first, all time steps' outputs) and a linear hidden -> d_model;
/// - "head": mean over time (no mask), linear d_model -> classes ("output").
///
/// Initialisation as the reference's `_initialize_weights`: linears N(0, 0.01) with zero
/// bias; the LSTM keeps PyTorch's default U(-1/sqrt(hidden), 1/sqrt(hidden)) for all its
/// weights and both biases (LibTorch's nn::LSTM does the same).
///
/// Named splits. SpecTrain's four modules are stage0 = "embed" + "lstm1", stage1 = "lstm2",
/// stage2 = "lstm3", stage3 = "lstm4" + "head"; docs/schemes.md, "SpecTrain: models and module-to-stage maps"'s maps
/// [0,0,1,1,1] and [0,1,2,3,3] become spectrain_2 = [3, 3] and spectrain_4 = [2, 1, 1, 2] (defined when layers = 4).
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include "core/config/bounds.h"
#include "core/device/compat.h"
#include "models/blocks/init.h"
#include "models/blocks/text.h"

namespace pipelab::models {
namespace {

struct ResidualLstmOptions {
  int64_t num_words = 10000;
  int64_t d_model = 128;
  int64_t hidden = 128;
  int64_t layers = 4;
  template <class V>
  void fields(V& v) {
    v("num_words", num_words, "vocabulary size of the embedding (at least the dataset's num_words)", width_bound());
    v("d_model", d_model, "embedding width, kept by every residual block", width_bound());
    v("hidden", hidden, "LSTM hidden size", width_bound());
    v("layers", layers, "residual LSTM blocks", repeats_bound());
  }
};

/// x + projection_matrix(LSTM(x)) over all time steps (one block of the reference's stages).
class ResidualLstmBlockImpl : public torch::nn::Module {
 public:
  ResidualLstmBlockImpl(int64_t d_model, int64_t hidden) {
    lstm_ = register_module("LSTM", torch::nn::LSTM(torch::nn::LSTMOptions(d_model, hidden).batch_first(true)));
    projection_ = register_module("projection_matrix", torch::nn::Linear(hidden, d_model));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    at::Tensor h;
    if (x.is_cpu() && device::autocast_enabled(c10::DeviceType::CPU)) {
      // Under autocast on a CPU the LSTM runs in float32: oneDNN's bfloat16 LSTM needs the
      // CPU's AVX-512 bf16 instructions and elsewhere fails to build its primitive (an
      // internal error, not a slower kernel); in float32 a run has the same numbers on every CPU.
      device::AutocastPause float32(c10::DeviceType::CPU);
      h = std::get<0>(lstm_(x.to(at::kFloat)));
    } else {
      h = std::get<0>(lstm_(x));
    }
    return projection_(h) + x;
  }

 private:
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear projection_{nullptr};
};
TORCH_MODULE(ResidualLstmBlock);

class ResidualLstm : public Configured<ModelFactory, ResidualLstmOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    if (options_.d_model > 16) m.widths["d_model"] = 16;
    if (options_.hidden > 16) m.widths["hidden"] = 16;
    if (options_.num_words > 64) m.vocabulary["num_words"] = 64;
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    text_input(*this, data);
    const ResidualLstmOptions o = options_;
    const int64_t classes = data.classes;
    ModelDef def;
    def.blocks.push_back({"embed", [=] { return torch::nn::AnyModule(TokenEmbedding(o.num_words, o.d_model)); }});
    for (int64_t i = 1; i <= o.layers; ++i) {
      def.blocks.push_back(
          {fmt::format("lstm{}", i), [=] { return initialised(ResidualLstmBlock(o.d_model, o.hidden), init_spectrain); }});
    }
    def.blocks.push_back(
        {"head", [=] { return initialised(MeanPoolClassifier(o.d_model, classes), init_spectrain); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    if (o.layers == 4) def.named_balances = {{"spectrain_2", {3, 3}}, {"spectrain_4", {2, 1, 1, 2}}};
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::ResidualLstm, "residual_lstm",
                 "residual LSTM classifier for word ids (SpecTrain's IMDB Res-LSTM): embed, LSTM blocks, head");
}
