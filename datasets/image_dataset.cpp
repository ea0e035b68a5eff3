#include "datasets/image_dataset.h"

#include <ATen/ATen.h>

#include "core/util/error.h"

namespace pipelab {

ImageDataset::ImageDataset(at::Tensor labels, std::shared_ptr<const ImageTransform> transform, bool train)
    : labels_(std::move(labels)), transform_(std::move(transform)), train_(train) {
  PIPELAB_ASSERT(labels_.dim() == 1 && labels_.scalar_type() == at::kLong, "labels must be int64 [N]");
}

int64_t ImageDataset::size() const { return labels_.size(0); }

Batch ImageDataset::get(const std::vector<int64_t>& indices, uint64_t seed) const {
  std::vector<at::Tensor> images;
  images.reserve(indices.size());
  for (const int64_t i : indices) images.push_back(image(i));
  return {transform_->apply(images, seed, train_), labels_.index_select(0, at::tensor(indices, at::kLong)), at::Tensor()};
}

ImageTensorDataset::ImageTensorDataset(at::Tensor images, at::Tensor labels,
                                       std::shared_ptr<const ImageTransform> transform, bool train)
    : ImageDataset(std::move(labels), std::move(transform), train), images_(images.contiguous()) {
  PIPELAB_ASSERT(images_.dim() == 4 && images_.scalar_type() == at::kByte && images_.size(0) == size(),
                 "images must be uint8 [N, C, H, W] with one label each");
}

at::Tensor ImageTensorDataset::image(int64_t i) const { return images_.select(0, i); }

ImageFileDataset::ImageFileDataset(std::vector<std::string> paths, at::Tensor labels,
                                   std::shared_ptr<const ImageTransform> transform, bool train,
                                   std::function<at::Tensor(const std::string&)> decode)
    : ImageDataset(std::move(labels), std::move(transform), train),
      paths_(std::move(paths)),
      decode_(std::move(decode)) {
  PIPELAB_ASSERT(static_cast<int64_t>(paths_.size()) == size(), "{} paths for {} labels", paths_.size(), size());
}

at::Tensor ImageFileDataset::image(int64_t i) const { return decode_(paths_.at(static_cast<size_t>(i))); }

}  // namespace pipelab
