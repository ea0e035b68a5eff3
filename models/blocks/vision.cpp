#include "models/blocks/vision.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "core/nn/batch_norm.h"
#include "core/nn/dropout.h"
#include "models/blocks/conv_bn.h"

namespace pipelab::models {

ImageShape image_input(const Component& model, const DataSpec& data, int64_t min_side, const std::string& why) {
  const auto& s = data.input_shape;
  if (s.size() != 3 || data.integer_input) {
    model.fail("", fmt::format("needs image data [channels, height, width], but examples have shape {}", shape_text(s)),
               "use an image dataset (e.g. synthetic with shape: [3, 32, 32]) or another model type");
  }
  if (s[1] < min_side || s[2] < min_side) {
    model.fail("",
               fmt::format("needs images of at least {}x{}{}, but examples are {}x{}", min_side, min_side,
                           why.empty() ? "" : " (" + why + ")", s[1], s[2]),
               fmt::format("use images of at least {}x{} (e.g. resize or upsample the dataset)", min_side, min_side));
  }
  return {s[0], s[1], s[2]};
}

Sequence imagenet_stem(int64_t in, int64_t out) {
  Sequence stem = conv_bn(ConvBnOptions(in, out, 7).stride(2).padding(3));
  stem->add("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
  return stem;
}

Sequence classifier(int64_t channels, int64_t classes, const ClassifierOptions& options) {
  Sequence head;
  if (options.bn_relu) {
    head->add("bn", nn::BatchNorm(channels));
    head->add("relu", torch::nn::ReLU());
  }
  head->add("pool", torch::nn::AdaptiveAvgPool2d(1));
  head->add("flatten", torch::nn::Flatten());
  if (options.dropout > 0) head->add("dropout", nn::Dropout(options.dropout));
  head->add("fc", torch::nn::Linear(channels, classes));
  return head;
}

}  // namespace pipelab::models
