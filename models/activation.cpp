#include "models/activation.h"

#include <torch/nn/modules/activation.h>

namespace pipelab::models {

torch::nn::AnyModule make_activation(Activation a) {
  switch (a) {
    case Activation::Relu: return torch::nn::AnyModule(torch::nn::ReLU());
    case Activation::Tanh: return torch::nn::AnyModule(torch::nn::Tanh());
    case Activation::Gelu: return torch::nn::AnyModule(torch::nn::GELU());
    case Activation::Sigmoid: return torch::nn::AnyModule(torch::nn::Sigmoid());
  }
  return {};
}

}  // namespace pipelab::models
