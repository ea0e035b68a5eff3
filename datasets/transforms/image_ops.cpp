#include "datasets/transforms/image_ops.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/model/model.h"
#include "core/util/error.h"

namespace pipelab {
namespace {

// One pass over the output: every output pixel reads its source pixel or is zero. The
// common CIFAR path (pad-crop + flip of a uint8 image straight into the float batch)
// costs one read and one write per pixel.
template <class Src, class Dst>
void place(const Src* src, int64_t channels, int64_t h, int64_t w, const Window& win, bool flip, Dst* dst) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < win.height; ++y) {
      Dst* row = dst + (c * win.height + y) * win.width;
      const int64_t sy = win.top + y;
      if (sy < 0 || sy >= h) {
        std::fill(row, row + win.width, Dst(0));
        continue;
      }
      const Src* srow = src + (c * h + sy) * w;
      for (int64_t x = 0; x < win.width; ++x) {
        const int64_t sx = win.left + (flip ? win.width - 1 - x : x);
        row[x] = (sx < 0 || sx >= w) ? Dst(0) : static_cast<Dst>(srow[sx]);
      }
    }
  }
}

template <class Dst>
void place_from(const at::Tensor& image, const Window& win, bool flip, Dst* dst) {
  PIPELAB_ASSERT(image.dim() == 3 && image.is_contiguous(), "image must be contiguous [C, H, W], got {}",
                 shape_text(image.sizes()));
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  if (image.scalar_type() == at::kByte) {
    place(image.data_ptr<uint8_t>(), c, h, w, win, flip, dst);
  } else {
    PIPELAB_ASSERT(image.scalar_type() == at::kFloat, "images are uint8 or float, got {}",
                   c10::toString(image.scalar_type()));
    place(image.data_ptr<float>(), c, h, w, win, flip, dst);
  }
}

}  // namespace

at::Tensor crop(const at::Tensor& image, const Window& window, bool flip, at::ScalarType out_dtype) {
  const at::Tensor src = image.contiguous();
  at::Tensor out = at::empty({src.size(0), window.height, window.width}, src.options().dtype(out_dtype));
  if (out_dtype == at::kByte) {
    PIPELAB_ASSERT(src.scalar_type() == at::kByte, "a uint8 crop needs a uint8 image");
    place(src.data_ptr<uint8_t>(), src.size(0), src.size(1), src.size(2), window, flip, out.data_ptr<uint8_t>());
  } else {
    crop_into(src, window, flip, out);
  }
  return out;
}

void crop_into(const at::Tensor& image, const Window& window, bool flip, at::Tensor& dest) {
  PIPELAB_ASSERT(dest.scalar_type() == at::kFloat && dest.is_contiguous() &&
                     dest.sizes() == at::IntArrayRef({image.size(0), window.height, window.width}),
                 "crop destination {} for a {}x{} window", shape_text(dest.sizes()), window.height, window.width);
  place_from(image.contiguous(), window, flip, dest.data_ptr<float>());
}

at::Tensor hflip(const at::Tensor& image) {
  return crop(image, {0, 0, image.size(1), image.size(2)}, true, image.scalar_type());
}

at::Tensor resize(const at::Tensor& image, int64_t height, int64_t width) {
  const at::Tensor x = image.to(at::kFloat).unsqueeze(0);
  const bool shrinking = height < image.size(1) || width < image.size(2);
  const at::Tensor y = shrinking ? at::_upsample_bilinear2d_aa(x, {height, width}, false)
                                 : at::upsample_bilinear2d(x, {height, width}, false);
  return y.squeeze(0).round_().clamp_(0, 255).contiguous();
}

std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t size) {
  const bool tall = width <= height;
  const int64_t short_side = tall ? width : height, long_side = tall ? height : width;
  const int64_t other = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(long_side) /
                                             static_cast<double>(short_side));
  return tall ? std::make_pair(other, size) : std::make_pair(size, other);
}

Window center_window(int64_t image_height, int64_t image_width, int64_t height, int64_t width) {
  // std::nearbyint rounds halves to even under the default rounding mode, as Python's round.
  return {static_cast<int64_t>(std::nearbyint(static_cast<double>(image_height - height) / 2.0)),
          static_cast<int64_t>(std::nearbyint(static_cast<double>(image_width - width) / 2.0)), height, width};
}

Window random_crop_window(Rng& rng, int64_t image_height, int64_t image_width, int64_t height, int64_t width,
                          int64_t padding) {
  const int64_t top = rng.below(image_height + 2 * padding - height + 1) - padding;
  const int64_t left = rng.below(image_width + 2 * padding - width + 1) - padding;
  return {top, left, height, width};
}

Window random_resized_crop_window(Rng& rng, int64_t image_height, int64_t image_width, std::pair<double, double> scale,
                                  std::pair<double, double> ratio) {
  const double area = static_cast<double>(image_height * image_width);
  const double log_lo = std::log(ratio.first), log_hi = std::log(ratio.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale.first, scale.second);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= image_width && h > 0 && h <= image_height) {
      const int64_t top = rng.below(image_height - h + 1);
      const int64_t left = rng.below(image_width - w + 1);
      return {top, left, h, w};
    }
  }
  // No try fitted: the whole image, cut to the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(image_width) / static_cast<double>(image_height);
  int64_t w = image_width, h = image_height;
  if (in_ratio < ratio.first) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / ratio.first));
  } else if (in_ratio > ratio.second) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * ratio.second));
  }
  return {(image_height - h) / 2, (image_width - w) / 2, h, w};
}

void normalize_(at::Tensor& batch, const std::vector<double>& mean, const std::vector<double>& std) {
  PIPELAB_ASSERT(batch.dim() == 4 && static_cast<size_t>(batch.size(1)) == mean.size() && mean.size() == std.size(),
                 "normalising {} with {} means and {} stds", shape_text(batch.sizes()), mean.size(), std.size());
  const auto channel = [&](const std::vector<double>& v) {
    return at::tensor(std::vector<float>(v.begin(), v.end()), batch.options()).view({1, -1, 1, 1});
  };
  batch.div_(255).sub_(channel(mean)).div_(channel(std));
}

}  // namespace pipelab
