#pragma once
/// The transforms of an image dataset, composed from its options: random resized crop,
/// resize + centre crop, random crop with zero padding, horizontal flip, normalisation.
/// Training examples get the random transforms (seeded per batch, so a batch is the same
/// whichever thread builds it); test examples get only the deterministic ones.
///
/// Order, as torchvision pipelines write it:
///   train: RandomResizedCrop(random_resized_crop)  or  Resize(resize) + CenterCrop(center_crop)
///          -> RandomCrop(size, padding=crop_padding) -> RandomHorizontalFlip -> ToTensor -> Normalize
///   test:  Resize(resize) -> CenterCrop(center_crop) -> ToTensor -> Normalize
#include <ATen/Tensor.h>

#include <string>
#include <vector>

#include "core/config/registry.h"
#include "datasets/transforms/image_ops.h"

namespace pipelab {

/// Transform options, embedded in each image dataset's options with that dataset's
/// defaults (e.g. CIFAR-10's normalisation constants).
struct ImageTransformOptions {
  bool augment = true;
  int64_t random_resized_crop = 0;
  std::vector<double> resized_crop_scale{0.08, 1.0};
  std::vector<double> resized_crop_ratio{3.0 / 4.0, 4.0 / 3.0};
  int64_t resize = 0;
  int64_t center_crop = 0;
  int64_t crop_padding = 0;
  bool flip = false;
  bool normalize = true;
  std::vector<double> mean, std;

  template <class V>
  void fields(V& v) {
    v("augment", augment, "apply the random transforms to training examples (false: train like test)");
    v("random_resized_crop", random_resized_crop,
      "train: crop a random area share and aspect ratio, resized to this size (0: off)", non_negative);
    v("resized_crop_scale", resized_crop_scale, "area share range of random_resized_crop", each(in_range(0, 1)));
    v("resized_crop_ratio", resized_crop_ratio, "aspect ratio range of random_resized_crop", each(positive));
    v("resize", resize, "resize the shorter side to this size (test; train without random_resized_crop; 0: off)",
      non_negative);
    v("center_crop", center_crop, "crop the centre to this square size after resize (0: off)", non_negative);
    v("crop_padding", crop_padding, "train: random crop of the same size after padding each side with zeros (0: off)",
      non_negative);
    v("flip", flip, "train: horizontal flip with probability 1/2");
    v("normalize", normalize, "scale pixels to [0, 1], then subtract mean and divide by std per channel");
    v("mean", mean, "per-channel mean of the [0, 1] pixels", non_empty);
    v("std", std, "per-channel standard deviation of the [0, 1] pixels", each(positive));
  }
};

/// ImageNet's usual transforms (PipeOptim's setting, docs/schemes.md, "PipeOptim scripts"): random resized
/// crop 224 and flip for training, resize 256 and centre crop 224 for testing, ImageNet's
/// channel means and deviations.
ImageTransformOptions imagenet_transform();

/// A resolved transform for images of one shape [C, H, W].
class ImageTransform {
 public:
  /// Checks `options` against the input shape; a mismatch (e.g. 3 means for 1 channel) is
  /// a ConfigError at the offending option of `owner`'s section.
  ImageTransform(ImageTransformOptions options, std::vector<int64_t> input_shape, const Component& owner);

  /// [C, h, w] of every transformed example (the same for both splits).
  const std::vector<int64_t>& output_shape() const { return output_shape_; }

  /// Transforms uint8 images [C, H, W] into a float batch [N, C, h, w]; `train` applies
  /// the random transforms, drawn from `seed`.
  at::Tensor apply(const std::vector<at::Tensor>& images, uint64_t seed, bool train) const;

  /// "random crop 32 (padding 4), flip, normalised" for dataset descriptions.
  std::string describe() const;

 private:
  /// Transforms one image into `dest` ([C, h, w] float, 0..255).
  void transform_one(const at::Tensor& image, Rng* rng, at::Tensor dest) const;

  ImageTransformOptions o_;
  std::vector<int64_t> input_shape_, output_shape_;
};

}  // namespace pipelab
