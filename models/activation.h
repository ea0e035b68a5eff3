#pragma once
/// Activation functions selectable by name in model options.
#include <torch/nn/modules/container/any.h>

#include "core/config/fields.h"

namespace pipelab::models {

enum class Activation { Relu, Tanh, Gelu, Sigmoid };

inline const Choices<Activation>& activation_choices() {
  static const Choices<Activation> c{
      {"relu", Activation::Relu}, {"tanh", Activation::Tanh}, {"gelu", Activation::Gelu}, {"sigmoid", Activation::Sigmoid}};
  return c;
}

/// A module applying the activation.
torch::nn::AnyModule make_activation(Activation a);

}  // namespace pipelab::models
