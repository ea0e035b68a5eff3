#pragma once
/// The two ends of an image classifier, shared by the vision models: the input check, the
/// ImageNet stem (ResNet, DenseNet) and the pooled linear head (ResNet, DenseNet, GoogLeNet,
/// MobileNetV2, Inception-v3, AmoebaNet).
#include <string>

#include "core/model/model.h"
#include "models/blocks/containers.h"

namespace pipelab::models {

/// One example's [channels, height, width].
struct ImageShape {
  int64_t channels = 0, height = 0, width = 0;
};

/// The image shape of `data`. Examples that are not [C, H, W], or whose sides are below
/// `min_side`, are a ConfigError on `model`'s section; `why` says what needs that size.
ImageShape image_input(const Component& model, const DataSpec& data, int64_t min_side = 1, const std::string& why = "");

/// The ImageNet stem: 7x7/2 conv (no bias) -> bn -> ReLU -> 3x3/2 max-pool with padding 1
/// (torchvision's ResNet and DenseNet; steps "conv", "bn", "relu", "pool").
Sequence imagenet_stem(int64_t in, int64_t out);

/// Options of classifier().
struct ClassifierOptions {
  bool bn_relu = false;  ///< batch norm and ReLU first (DenseNet's final norm)
  double dropout = 0;    ///< dropout before the linear layer (MobileNetV2 0.2, Inception-v3 0.5)
};

/// [bn -> relu ->] global average pool -> flatten -> [dropout ->] linear "fc". Global pooling
/// is what the references' fixed windows compute at their input sizes (AvgPool2d(7) on 7x7
/// maps, avg_pool2d(4) on CIFAR's 4x4 maps) and keeps other input sizes working.
Sequence classifier(int64_t channels, int64_t classes, const ClassifierOptions& options = {});

}  // namespace pipelab::models
