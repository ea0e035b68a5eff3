#pragma once
/// Weight initialisations of the reference models, applied to a freshly built block (the
/// framework seeds each block before building it, core/model/model.h). Batch norms need
/// nothing: pipelab's nn::BatchNorm starts at weight 1, bias 0, as every reference sets.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

namespace pipelab::models {

/// Every Conv2d in `module`: Kaiming-normal weights with fan_out and the ReLU gain, zero
/// biases (torchvision's ResNet/VGG/MobileNetV2; PipeDream's and SpecTrain's generated
/// stages, `_initialize_weights`).
void init_convs_kaiming_fan_out(torch::nn::Module& module);

/// Every Linear in `module`: N(0, std) weights and zero biases (SpecTrain's VGG16, DenseNet
/// and GoogLeNet stages: std 0.01; torchvision's MobileNetV2: std 0.01).
void init_linears_normal(torch::nn::Module& module, double std);

/// SpecTrain's `_initialize_weights` (the PipeDream-generated stages of its VGG16, DenseNet
/// and GoogLeNet): init_convs_kaiming_fan_out and init_linears_normal with std 0.01.
void init_spectrain(torch::nn::Module& module);

/// Applies `init` to a freshly built module and returns it as a block.
template <class M, class F>
torch::nn::AnyModule initialised(M module, F init) {
  init(*module);
  return torch::nn::AnyModule(std::move(module));
}

/// Every Conv2d and Linear weight in `module` from N(0, std) truncated at +-2 std; biases
/// keep LibTorch's default. PipeOptim's Inception-v3 stages draw scipy's
/// truncnorm(-2, 2, scale=0.1) (docs/schemes.md, "PipeOptim scripts").
void init_truncated_normal(torch::nn::Module& module, double std);

/// Fills `t` in place from N(0, std) truncated at +-2 std (inverse-CDF sampling from the
/// current default generator, as torch.nn.init.trunc_normal_ does).
void truncated_normal_(torch::Tensor& t, double std);

}  // namespace pipelab::models
