#pragma once
/// The two ends of a text model, shared by the IMDB models of SpecTrain (`transformer`,
/// `residual_lstm`): the input check, a word embedding that rejects ids outside its
/// vocabulary, the classifier head that averages over time before a linear layer, and a
/// language model's head, a linear layer at every position.
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "core/model/model.h"

namespace pipelab::models {

/// The sequence length of `data`: examples must be int64 word ids of shape [maxlen] (the
/// `imdb` and `glue` datasets, or `tensors` with an integer x). Anything else is a
/// ConfigError on `model`'s section.
int64_t text_input(const Component& model, const DataSpec& data);

/// The lowest finite value of `dtype`, what attention writes at a key it must not see
/// (Hugging Face's finfo(dtype).min): unlike -inf, an all-padded row gets uniform weights
/// rather than 0/0. The scores' dtype: under autocast bfloat16 or float16 while the
/// residual stream is float32, and float32's lowest overflows them.
double lowest_score(at::ScalarType dtype);

/// nn.Embedding(num_words, dim) (parameter "weight", N(0, 1) as PyTorch's default) whose
/// forward first checks that every id is in [0, num_words). Without the check an id from a
/// dataset with a larger vocabulary is an out-of-range index deep inside ATen; with it, a
/// UserError says which option to change.
class TokenEmbeddingImpl : public torch::nn::Module {
 public:
  TokenEmbeddingImpl(int64_t num_words, int64_t dim);
  /// ids [N, T] int64 -> [N, T, dim].
  torch::Tensor forward(const torch::Tensor& ids);

 private:
  int64_t num_words_;
  torch::Tensor weight_;
};
TORCH_MODULE(TokenEmbedding);

/// nn.Linear(dim, classes) named "output" at every position: [N, T, dim] -> [N, T, classes]
/// (a language model's head).
class PositionClassifierImpl : public torch::nn::Module {
 public:
  PositionClassifierImpl(int64_t dim, int64_t classes);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear output_{nullptr};
};
TORCH_MODULE(PositionClassifier);

/// Mean over the time axis (all positions, padding included: the reference has no mask,
/// docs/schemes.md, "Quirks"), then the same linear layer "output" (SpecTrain's stage3).
class MeanPoolClassifierImpl : public PositionClassifierImpl {
 public:
  using PositionClassifierImpl::PositionClassifierImpl;
  /// [N, T, dim] -> logits [N, classes].
  torch::Tensor forward(const torch::Tensor& x);
};
TORCH_MODULE(MeanPoolClassifier);

/// The same head averaging over the positions a padding mask keeps ([N, T] bool, true for a
/// word); the same parameters. An all-padding example averages nothing and gets the bias.
class MaskedMeanPoolClassifierImpl : public MeanPoolClassifierImpl {
 public:
  using MeanPoolClassifierImpl::MeanPoolClassifierImpl;
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
};
TORCH_MODULE(MaskedMeanPoolClassifier);

}  // namespace pipelab::models
