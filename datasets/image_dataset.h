#pragma once
/// Image datasets: uint8 images [C, H, W] and class labels, turned into float batches by
/// an ImageTransform (random augmentation for the training split, seeded per batch).
#include <ATen/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "datasets/transforms/image_transform.h"

namespace pipelab {

/// Images held or fetched one by one; get() transforms the batch.
class ImageDataset : public Dataset {
 public:
  /// `labels`: int64 [N]. `train` turns the transform's random augmentation on.
  ImageDataset(at::Tensor labels, std::shared_ptr<const ImageTransform> transform, bool train);
  int64_t size() const override;
  Batch get(const std::vector<int64_t>& indices, uint64_t seed) const override;

 protected:
  /// Image i as uint8 [C, H, W].
  virtual at::Tensor image(int64_t i) const = 0;

 private:
  at::Tensor labels_;
  std::shared_ptr<const ImageTransform> transform_;
  bool train_;
};

/// Images decoded up front into one uint8 tensor [N, C, H, W] (CIFAR, MNIST).
class ImageTensorDataset : public ImageDataset {
 public:
  ImageTensorDataset(at::Tensor images, at::Tensor labels, std::shared_ptr<const ImageTransform> transform, bool train);

 protected:
  at::Tensor image(int64_t i) const override;

 private:
  at::Tensor images_;
};

/// Image files and their labels, one split of a folder-based dataset as listed (ImageFolder,
/// Food-101, Tiny-ImageNet), before an ImageFileDataset decodes them.
struct ImageListing {
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
};

/// Images decoded from their files when a batch needs them, as torchvision's ImageFolder
/// does (Tiny-ImageNet: 100,000 JPEGs would take 1.2 GB decoded).
class ImageFileDataset : public ImageDataset {
 public:
  /// `decode(path)` reads one file into uint8 [C, H, W]; errors are UserErrors naming it.
  ImageFileDataset(std::vector<std::string> paths, at::Tensor labels, std::shared_ptr<const ImageTransform> transform,
                   bool train, std::function<at::Tensor(const std::string&)> decode);

 protected:
  at::Tensor image(int64_t i) const override;

 private:
  std::vector<std::string> paths_;
  std::function<at::Tensor(const std::string&)> decode_;
};

}  // namespace pipelab
