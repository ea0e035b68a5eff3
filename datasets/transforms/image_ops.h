#pragma once
/// Image operations on one image [C, H, W] (uint8 or float) and on float batches, written
/// once for every image dataset. Geometry follows torchvision's conventions (window
/// sampling of RandomCrop / RandomResizedCrop, CenterCrop rounding, Resize of the
/// shorter side), so a pipelab transform means what the reference scripts' transform means.
#include <ATen/Tensor.h>

#include <utility>
#include <vector>

#include "datasets/transforms/rng.h"

namespace pipelab {

/// A rectangle in image coordinates; it may reach outside the image (zero padding).
struct Window {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const Window& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

/// The pixels of `window` (zero where it leaves the image), mirrored left-right when
/// `flip`, as [C, window.height, window.width] of dtype `out_dtype` (uint8 or float).
at::Tensor crop(const at::Tensor& image, const Window& window, bool flip, at::ScalarType out_dtype);
/// Writes crop(image, window, flip) into `dest` (float [C, window.height, window.width]).
void crop_into(const at::Tensor& image, const Window& window, bool flip, at::Tensor& dest);

/// The image mirrored left-right (torchvision's hflip).
at::Tensor hflip(const at::Tensor& image);

/// Bilinear resize to height x width with antialiasing when shrinking (torchvision's
/// Resize(antialias=True)); the result is rounded to whole 0..255 values, as resizing a
/// uint8 image gives. Returns float [C, height, width].
at::Tensor resize(const at::Tensor& image, int64_t height, int64_t width);

/// torchvision's Resize(size) with one int: the shorter side becomes `size`, the longer
/// int(size * long / short). Returns {height, width}.
std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t size);

/// The centred height x width window of an image (torchvision's CenterCrop: offsets
/// round((H - h) / 2), ties to even as Python's round).
Window center_window(int64_t image_height, int64_t image_width, int64_t height, int64_t width);

/// torchvision's RandomCrop(size, padding): a size-window of the image padded by `padding`
/// zeros on each side, at a uniform offset. Offsets are in unpadded coordinates.
Window random_crop_window(Rng& rng, int64_t image_height, int64_t image_width, int64_t height, int64_t width,
                          int64_t padding);

/// torchvision's RandomResizedCrop window: ten tries at an area share in `scale` and a
/// log-uniform aspect ratio in `ratio` that fits, else the centre crop closest to `ratio`.
Window random_resized_crop_window(Rng& rng, int64_t image_height, int64_t image_width, std::pair<double, double> scale,
                                  std::pair<double, double> ratio);

/// (x / 255 - mean[c]) / std[c] over a float batch [N, C, H, W] of 0..255 values, in place
/// (ToTensor then Normalize).
void normalize_(at::Tensor& batch, const std::vector<double>& mean, const std::vector<double>& std);

}  // namespace pipelab
