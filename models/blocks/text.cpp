#include "models/blocks/text.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <limits>

#include "core/util/error.h"

namespace pipelab::models {

int64_t text_input(const Component& model, const DataSpec& data) {
  if (!data.integer_input || data.input_shape.size() != 1) {
    model.fail("",
               fmt::format("needs word ids (int64 examples of shape [maxlen]), but the dataset gives {} examples "
                           "of shape {}",
                           data.integer_input ? "integer" : "floating-point", shape_text(data.input_shape)),
               "use a text dataset (imdb, glue) or a tensors file with an int64 x of shape [N, maxlen]");
  }
  return data.input_shape[0];
}

TokenEmbeddingImpl::TokenEmbeddingImpl(int64_t num_words, int64_t dim) : num_words_(num_words) {
  weight_ = register_parameter("weight", torch::randn({num_words, dim}));
}

torch::Tensor TokenEmbeddingImpl::forward(const torch::Tensor& ids) {
  if (ids.numel() > 0 && !ids.is_meta()) {  // a profile from shapes has no ids to check
    const int64_t largest = ids.max().item<int64_t>(), smallest = ids.min().item<int64_t>();
    if (largest >= num_words_ || smallest < 0) {
      throw UserError(fmt::format(
          "model: a word id is {}, outside the embedding's vocabulary [0, {}); set model.num_words to the "
          "dataset's num_words (or larger)",
          largest >= num_words_ ? largest : smallest, num_words_));
    }
  }
  return torch::embedding(weight_, ids);
}

PositionClassifierImpl::PositionClassifierImpl(int64_t dim, int64_t classes) {
  output_ = register_module("output", torch::nn::Linear(dim, classes));
}

torch::Tensor PositionClassifierImpl::forward(const torch::Tensor& x) { return output_(x); }

torch::Tensor MeanPoolClassifierImpl::forward(const torch::Tensor& x) { return PositionClassifierImpl::forward(x.mean(1)); }

torch::Tensor MaskedMeanPoolClassifierImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor keep = mask.unsqueeze(-1).to(x.scalar_type());
  const torch::Tensor count = keep.sum(1).clamp_min(1);
  return MeanPoolClassifierImpl::forward((x * keep).sum(1, /*keepdim=*/true) / count.unsqueeze(1));
}

double lowest_score(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    case at::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kDouble: return std::numeric_limits<double>::lowest();
    default: return std::numeric_limits<float>::lowest();
  }
}

}  // namespace pipelab::models
