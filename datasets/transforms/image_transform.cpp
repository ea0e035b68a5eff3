#include "datasets/transforms/image_transform.h"

#include <ATen/ATen.h>

#include "core/model/model.h"
#include "core/util/error.h"
#include "core/util/names.h"

namespace pipelab {
namespace {

std::pair<double, double> range_of(const std::vector<double>& v, const char* key, const Component& owner) {
  if (v.size() != 2 || v[0] > v[1]) {
    owner.fail(key, fmt::format("must be two numbers [low, high] with low <= high, got {} numbers", v.size()),
               fmt::format("write e.g. `{}: [0.08, 1.0]`", key));
  }
  return {v[0], v[1]};
}

}  // namespace

ImageTransform::ImageTransform(ImageTransformOptions options, std::vector<int64_t> input_shape, const Component& owner)
    : o_(std::move(options)), input_shape_(std::move(input_shape)) {
  PIPELAB_ASSERT(input_shape_.size() == 3, "image shape {} is not [C, H, W]", shape_text(input_shape_));
  const int64_t c = input_shape_[0];
  range_of(o_.resized_crop_scale, "resized_crop_scale", owner);
  range_of(o_.resized_crop_ratio, "resized_crop_ratio", owner);
  if (o_.normalize) {
    for (const auto& [key, v] : {std::make_pair("mean", &o_.mean), std::make_pair("std", &o_.std)}) {
      if (static_cast<int64_t>(v->size()) != c) {
        owner.fail(key, fmt::format("has {} values for images with {} channel{}", v->size(), c, c == 1 ? "" : "s"),
                   fmt::format("give one value per channel ({})", c));
      }
    }
  }
  // Test geometry: resize, then centre crop.
  int64_t h = input_shape_[1], w = input_shape_[2];
  if (o_.resize) std::tie(h, w) = shorter_side_size(h, w, o_.resize);
  if (o_.center_crop) {
    if (o_.center_crop > h || o_.center_crop > w) {
      owner.fail("center_crop",
                 fmt::format("{} is larger than the {}x{} image it crops{}", o_.center_crop, h, w,
                             o_.resize ? " (after resize)" : ""),
                 fmt::format("use center_crop <= {} or a larger resize", std::min(h, w)));
    }
    h = w = o_.center_crop;
  }
  output_shape_ = {c, h, w};
  if (o_.augment && o_.random_resized_crop && (o_.random_resized_crop != h || o_.random_resized_crop != w)) {
    owner.fail("center_crop",
               fmt::format("training examples come out {0}x{0} (random_resized_crop) but test examples {1}x{2}",
                           o_.random_resized_crop, h, w),
               fmt::format("set center_crop: {} (with resize at least that large) so both splits have one shape",
                           o_.random_resized_crop));
  }
}

void ImageTransform::transform_one(const at::Tensor& image, Rng* rng, at::Tensor dest) const {
  at::Tensor x = image.contiguous();
  const bool resized_crop = rng && o_.random_resized_crop > 0;
  if (resized_crop) {
    const Window win =
        random_resized_crop_window(*rng, x.size(1), x.size(2), {o_.resized_crop_scale[0], o_.resized_crop_scale[1]},
                                   {o_.resized_crop_ratio[0], o_.resized_crop_ratio[1]});
    x = resize(crop(x, win, false, at::kFloat), o_.random_resized_crop, o_.random_resized_crop);
  } else if (o_.resize) {
    const auto [h, w] = shorter_side_size(x.size(1), x.size(2), o_.resize);
    if (h != x.size(1) || w != x.size(2)) x = resize(x, h, w);
  }
  Window win{0, 0, x.size(1), x.size(2)};
  if (!resized_crop && o_.center_crop) win = center_window(x.size(1), x.size(2), o_.center_crop, o_.center_crop);
  bool flip = false;
  if (rng && o_.crop_padding) {
    if (!(win == Window{0, 0, x.size(1), x.size(2)})) x = crop(x, win, false, x.scalar_type());
    win = random_crop_window(*rng, x.size(1), x.size(2), x.size(1), x.size(2), o_.crop_padding);
  }
  if (rng && o_.flip) flip = rng->coin();
  crop_into(x, win, flip, dest);
}

at::Tensor ImageTransform::apply(const std::vector<at::Tensor>& images, uint64_t seed, bool train) const {
  std::vector<int64_t> shape{static_cast<int64_t>(images.size())};
  shape.insert(shape.end(), output_shape_.begin(), output_shape_.end());
  at::Tensor out = at::empty(shape, at::kFloat);
  Rng rng(seed);
  Rng* random = train && o_.augment ? &rng : nullptr;
  for (size_t i = 0; i < images.size(); ++i) {
    PIPELAB_ASSERT(images[i].sizes() == at::IntArrayRef(input_shape_) || o_.resize, "image {} has shape {}, not {}", i,
                   shape_text(images[i].sizes()), shape_text(input_shape_));
    transform_one(images[i], random, out.select(0, static_cast<int64_t>(i)));
  }
  if (o_.normalize) {
    normalize_(out, o_.mean, o_.std);
  } else {
    out.div_(255);
  }
  return out;
}

std::string ImageTransform::describe() const {
  std::vector<std::string> parts;
  if (o_.augment && o_.random_resized_crop)
    parts.push_back(fmt::format("random resized crop {}", o_.random_resized_crop));
  if (o_.resize) parts.push_back(fmt::format("resize {}", o_.resize));
  if (o_.center_crop) parts.push_back(fmt::format("centre crop {}", o_.center_crop));
  if (o_.augment && o_.crop_padding) parts.push_back(fmt::format("random crop (padding {})", o_.crop_padding));
  if (o_.augment && o_.flip) parts.push_back("flip");
  parts.push_back(o_.normalize ? "normalised" : "scaled to [0, 1]");
  return join(parts, ", ");
}

ImageTransformOptions imagenet_transform() {
  ImageTransformOptions t;
  t.random_resized_crop = 224;
  t.flip = true;
  t.resize = 256;
  t.center_crop = 224;
  t.mean = {0.485, 0.456, 0.406};
  t.std = {0.229, 0.224, 0.225};
  return t;
}

}  // namespace pipelab
