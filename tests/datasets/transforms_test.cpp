// Image transforms: exact pixels of crop/pad/flip/normalise/resize on tiny tensors,
// torchvision's window conventions, and seeded, reproducible augmentation.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <set>

#include "datasets/transforms/image_transform.h"
#include "tests/datasets/dataset_test_util.h"

namespace pipelab::transforms_test {
namespace {

using testing::contains;

/// [1, 3, 3] holding 1..9 row by row.
at::Tensor nine() { return at::arange(1, 10, at::kByte).reshape({1, 3, 3}); }

at::Tensor rows(std::vector<std::vector<float>> r) {
  std::vector<float> flat;
  for (const auto& row : r) flat.insert(flat.end(), row.begin(), row.end());
  return at::tensor(flat).reshape({1, static_cast<int64_t>(r.size()), static_cast<int64_t>(r[0].size())});
}

TEST(Transforms, CropPadsWithZerosAndFlips) {
  EXPECT_TRUE(at::equal(crop(nine(), {-1, -1, 3, 3}, false, at::kFloat), rows({{0, 0, 0}, {0, 1, 2}, {0, 4, 5}})));
  EXPECT_TRUE(at::equal(crop(nine(), {-1, -1, 3, 3}, true, at::kFloat), rows({{0, 0, 0}, {2, 1, 0}, {5, 4, 0}})));
  EXPECT_TRUE(at::equal(crop(nine(), {1, 1, 3, 3}, false, at::kFloat), rows({{5, 6, 0}, {8, 9, 0}, {0, 0, 0}})));
  EXPECT_TRUE(
      at::equal(crop(nine(), {0, 1, 2, 1}, false, at::kByte), at::tensor({2, 5}, at::kByte).reshape({1, 2, 1})));
  EXPECT_TRUE(at::equal(hflip(nine()), at::tensor({3, 2, 1, 6, 5, 4, 9, 8, 7}, at::kByte).reshape({1, 3, 3})));
  // Channels are cropped alike.
  const at::Tensor two = at::stack({nine()[0], nine()[0] + 10});
  EXPECT_TRUE(at::equal(crop(two, {2, 2, 1, 1}, false, at::kByte), at::tensor({9, 19}, at::kByte).reshape({2, 1, 1})));
}

TEST(Transforms, NormalizeIsToTensorThenNormalize) {
  at::Tensor batch = at::tensor({51.0f, 255.0f}).reshape({1, 2, 1, 1});
  normalize_(batch, {0.1, 0.5}, {0.2, 0.25});
  EXPECT_FLOAT_EQ(batch[0][0][0][0].item<float>(), 0.5f);  // (51/255 - 0.1) / 0.2
  EXPECT_FLOAT_EQ(batch[0][1][0][0].item<float>(), 2.0f);  // (1 - 0.5) / 0.25
}

TEST(Transforms, ResizeIsBilinearAndRounded) {
  const at::Tensor img = at::tensor({0, 255, 0, 255}, at::kByte).reshape({1, 2, 2});
  // Source x of output column i is (i + 0.5) / 2 - 0.5, clamped: 0, 0.25, 0.75, 1.
  EXPECT_TRUE(at::equal(resize(img, 2, 4), rows({{0, 64, 191, 255}, {0, 64, 191, 255}})));
  const at::Tensor flat = at::full({3, 5, 7}, 77, at::kByte);
  EXPECT_TRUE(at::equal(resize(flat, 3, 2), at::full({3, 3, 2}, 77.0f)));  // shrinking (antialiased)
  EXPECT_EQ(shorter_side_size(64, 64, 256), (std::pair<int64_t, int64_t>{256, 256}));
  EXPECT_EQ(shorter_side_size(100, 50, 25), (std::pair<int64_t, int64_t>{50, 25}));
  EXPECT_EQ(shorter_side_size(50, 101, 25), (std::pair<int64_t, int64_t>{25, 50}));  // int(50.5)
}

TEST(Transforms, WindowsFollowTorchvision) {
  EXPECT_EQ(center_window(64, 64, 56, 56), (Window{4, 4, 56, 56}));
  EXPECT_EQ(center_window(5, 5, 2, 2), (Window{2, 2, 2, 2}));  // round(1.5) = 2
  EXPECT_EQ(center_window(7, 6, 2, 2), (Window{2, 2, 2, 2}));  // round(2.5) = 2, ties to even
  Rng a(5), b(5);
  std::set<int64_t> tops;
  for (int i = 0; i < 400; ++i) {
    const Window w = random_crop_window(a, 32, 32, 32, 32, 4);
    EXPECT_EQ(w, random_crop_window(b, 32, 32, 32, 32, 4));
    EXPECT_EQ(w.height, 32);
    EXPECT_TRUE(w.left >= -4 && w.left <= 4);
    tops.insert(w.top);
  }
  EXPECT_EQ(tops, (std::set<int64_t>{-4, -3, -2, -1, 0, 1, 2, 3, 4}));
  for (int i = 0; i < 200; ++i) {
    const Window w = random_resized_crop_window(a, 48, 64, {0.08, 1.0}, {3.0 / 4, 4.0 / 3});
    EXPECT_TRUE(w.top >= 0 && w.left >= 0 && w.top + w.height <= 48 && w.left + w.width <= 64);
    const double share = static_cast<double>(w.height * w.width) / (48 * 64);
    EXPECT_TRUE(share > 0.06 && share < 1.0) << share;
  }
  // No window of the whole area with aspect 2..3 fits a square: the fallback cuts the
  // image to the nearest allowed ratio, centred: h = round(10 / 2) = 5.
  EXPECT_EQ(random_resized_crop_window(a, 10, 10, {1.0, 1.0}, {2.0, 3.0}), (Window{2, 0, 5, 10}));
}

std::unique_ptr<DatasetFactory> owner() { return Registry<DatasetFactory>::get().create_default("synthetic"); }

TEST(Transforms, AugmentationIsSeededCropThenFlip) {
  ImageTransformOptions o;
  o.crop_padding = 2;
  o.flip = true;
  o.mean = {0.5, 0.25};
  o.std = {0.5, 0.125};
  const ImageTransform t(o, {2, 6, 5}, *owner());
  EXPECT_EQ(t.output_shape(), (std::vector<int64_t>{2, 6, 5}));
  std::vector<at::Tensor> images;
  for (int i = 0; i < 4; ++i) images.push_back(at::randint(256, {2, 6, 5}, at::kLong).to(at::kByte));
  const at::Tensor a = t.apply(images, 11, true);
  EXPECT_TRUE(at::equal(a, t.apply(images, 11, true)));
  EXPECT_FALSE(at::equal(a, t.apply(images, 12, true)));
  // The same draws by hand: per image a padded-crop window, then a coin for the flip.
  Rng rng(11);
  const at::Tensor mean = at::tensor({0.5f, 0.25f}).view({2, 1, 1}), std = at::tensor({0.5f, 0.125f}).view({2, 1, 1});
  for (int i = 0; i < 4; ++i) {
    const Window w = random_crop_window(rng, 6, 5, 6, 5, 2);
    const bool flip = rng.coin();
    const at::Tensor expected = (crop(images[static_cast<size_t>(i)], w, flip, at::kFloat) / 255 - mean) / std;
    EXPECT_TRUE(at::allclose(a[i], expected, 1e-6, 1e-6)) << i;
  }
  // Test examples (and augment: false) are only normalised.
  const at::Tensor plain = (at::stack(images).to(at::kFloat) / 255 - mean) / std;
  EXPECT_TRUE(at::allclose(t.apply(images, 11, false), plain, 1e-6, 1e-6));
  o.augment = false;
  EXPECT_TRUE(at::allclose(ImageTransform(o, {2, 6, 5}, *owner()).apply(images, 11, true), plain, 1e-6, 1e-6));
}

TEST(Transforms, ResizeAndCentreCropShapes) {
  ImageTransformOptions o;
  o.random_resized_crop = 8;
  o.flip = true;
  o.resize = 10;
  o.center_crop = 8;
  o.normalize = false;
  const ImageTransform t(o, {3, 16, 12}, *owner());
  EXPECT_EQ(t.output_shape(), (std::vector<int64_t>{3, 8, 8}));
  const std::vector<at::Tensor> images{at::full({3, 16, 12}, 51, at::kByte)};
  EXPECT_TRUE(at::allclose(t.apply(images, 3, true), at::full({1, 3, 8, 8}, 0.2f)));
  EXPECT_TRUE(at::allclose(t.apply(images, 3, false), at::full({1, 3, 8, 8}, 0.2f)));
  EXPECT_TRUE(contains(t.describe(), "random resized crop 8, resize 10, centre crop 8, flip, scaled to [0, 1]"));
}

TEST(Transforms, OptionErrorsNameTheOption) {
  const auto error = [](ImageTransformOptions o, std::vector<int64_t> shape) {
    o.normalize = false;
    return testing::user_error([&] { ImageTransform(o, shape, *owner()); });
  };
  ImageTransformOptions o;
  o.center_crop = 40;
  EXPECT_TRUE(contains(error(o, {3, 32, 32}), "dataset.center_crop: 40 is larger than the 32x32 image it crops"));
  o.center_crop = 0;
  o.random_resized_crop = 24;
  EXPECT_TRUE(contains(error(o, {3, 32, 32}),
                       "training examples come out 24x24 (random_resized_crop) but test "
                       "examples 32x32"));
  o.random_resized_crop = 0;
  o.resized_crop_scale = {0.5};
  EXPECT_TRUE(contains(error(o, {3, 32, 32}), "dataset.resized_crop_scale: must be two numbers"));
}

}  // namespace
}  // namespace pipelab::transforms_test
