// JPEG decoding (libjpeg-turbo) and the Tiny-ImageNet folder layout, from tiny JPEGs
// written with libjpeg in a temp folder.
#include <gtest/gtest.h>

#include <filesystem>

#include <ATen/ATen.h>

#include "datasets/io/jpeg.h"
#include "tests/datasets/dataset_test_util.h"

namespace pipelab::image_files_test {
namespace {

using testing::contains;

#define SKIP_WITHOUT_JPEG() \
  if (!jpeg_supported()) GTEST_SKIP() << "built without libjpeg"

/// A 64x64 image that is one flat colour (JPEG keeps flat colours almost exactly).
at::Tensor flat(int r, int g, int b, int64_t size = 64) {
  return at::stack({at::full({size, size}, r, at::kByte), at::full({size, size}, g, at::kByte),
                    at::full({size, size}, b, at::kByte)});
}

TEST(ImageFiles, JpegRoundTripAndErrors) {
  SKIP_WITHOUT_JPEG();
  const at::Tensor image = flat(200, 100, 50, 16);
  const at::Tensor decoded = decode_jpeg(encode_jpeg(image, 100), "x.jpg");
  ASSERT_EQ(decoded.sizes(), image.sizes());
  EXPECT_LE((decoded.to(at::kInt) - image.to(at::kInt)).abs().max().item<int>(), 2);
  // A grey JPEG comes back as three equal channels.
  const at::Tensor grey = decode_jpeg(encode_jpeg(at::full({1, 8, 8}, 90, at::kByte)), "g.jpg");
  ASSERT_EQ(grey.sizes(), (std::vector<int64_t>{3, 8, 8}));
  EXPECT_TRUE(at::equal(grey[0], grey[2]));
  const std::string bytes = encode_jpeg(image);
  EXPECT_TRUE(contains(testing::user_error([&] { decode_jpeg(bytes.substr(0, bytes.size() / 2), "t.jpg"); }),
                       "t.jpg: not a readable JPEG image"));
  EXPECT_TRUE(contains(testing::user_error([&] { decode_jpeg("GIF89a", "n.jpg"); }), "n.jpg: not a readable JPEG"));
}

TEST(ImageFiles, CmykJpegsDecodeAsPillowConvertsThem) {
  SKIP_WITHOUT_JPEG();
  // libjpeg stores CMYK as given, with Adobe's marker, which readers take as inverted: the
  // stored (c, m, y, k) = (0, 128, 255, 64) is RGB (c k, m k, y k) / 255 = (0, 32, 64).
  const at::Tensor cmyk = at::stack({at::full({16, 16}, 0, at::kByte), at::full({16, 16}, 128, at::kByte),
                                     at::full({16, 16}, 255, at::kByte), at::full({16, 16}, 64, at::kByte)});
  const at::Tensor rgb = decode_jpeg(encode_jpeg(cmyk, 100), "cmyk.jpg");
  ASSERT_EQ(rgb.sizes(), (std::vector<int64_t>{3, 16, 16}));
  EXPECT_LE((rgb.to(at::kInt) - flat(0, 32, 64, 16).to(at::kInt)).abs().max().item<int>(), 2);
}

TEST(ImageFiles, AHeaderThatClaimsAHugeImageIsRefusedBeforeDecoding) {
  SKIP_WITHOUT_JPEG();
  // A few hundred bytes whose frame header (SOF0: FF C0, length, precision, height, width)
  // says 65000 x 65000: 12.7 GB of pixels if it were believed.
  std::string bytes = encode_jpeg(flat(1, 2, 3, 8));
  const size_t sof = bytes.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  for (const size_t at : {sof + 5, sof + 7}) bytes[at] = '\xFD', bytes[at + 1] = '\xE8';
  const std::string message = testing::user_error([&] { decode_jpeg(bytes, "bomb.jpg"); });
  EXPECT_TRUE(contains(message, "bomb.jpg: an image too large to decode (its header says 65000x65000")) << message;
  EXPECT_TRUE(contains(message, "Fix: resize it")) << message;
}

/// Two classes with two training images each (written n02 first: labels follow the
/// sorted wnids, not the order on disk) and three validation images.
void write_tiny_imagenet(const std::string& root) {
  const auto put = [&](const std::string& path, const at::Tensor& image) {
    testing::write_file(root + "/" + path, encode_jpeg(image, 100));
  };
  put("train/n02/images/n02_0.JPEG", flat(250, 0, 0));
  put("train/n02/images/n02_1.JPEG", flat(240, 0, 0));
  put("train/n01/images/n01_0.JPEG", flat(0, 0, 250));
  put("train/n01/images/n01_1.JPEG", flat(0, 0, 240));
  testing::write_file(root + "/train/n01/n01_boxes.txt", "n01_0.JPEG\t0\t0\t63\t63\n");
  put("val/images/val_0.JPEG", flat(0, 0, 200));
  put("val/images/val_1.JPEG", flat(200, 0, 0));
  put("val/images/val_2.JPEG", flat(0, 0, 100));
  testing::write_file(root + "/val/val_annotations.txt",
                      "val_0.JPEG\tn01\t0\t0\t10\t10\nval_1.JPEG\tn02\t1\t2\t3\t4\r\nval_2.JPEG\tn01\t0\t0\t1\t1\n");
}

TEST(ImageFiles, TinyImagenetLayout) {
  SKIP_WITHOUT_JPEG();
  testing::TempDir dir;
  write_tiny_imagenet(dir.file("tiny-imagenet-200"));
  const auto splits = testing::load_dataset(
      "{type: tiny_imagenet, random_resized_crop: 0, resize: 0, center_crop: 0, crop_padding: 8, normalize: false}",
      dir.path());
  EXPECT_EQ(splits.spec.classes, 2);
  EXPECT_EQ(splits.spec.input_shape, (std::vector<int64_t>{3, 64, 64}));
  const Batch train = testing::whole(*splits.train, 5), val = testing::whole(*splits.test);
  EXPECT_TRUE(at::equal(train.y, at::tensor({0, 0, 1, 1}, at::kLong)));  // n01 first
  EXPECT_TRUE(at::equal(val.y, at::tensor({0, 1, 0}, at::kLong)));
  // Channel means of the centre (padding never reaches it): blue for n01, red for n02.
  const at::Tensor centre = val.x.narrow(2, 16, 32).narrow(3, 16, 32).mean({2, 3});
  EXPECT_NEAR(centre[0][2].item<float>(), 200.0f / 255, 0.02);
  EXPECT_NEAR(centre[1][0].item<float>(), 200.0f / 255, 0.02);
  EXPECT_NEAR(centre[1][2].item<float>(), 0, 0.02);
}

TEST(ImageFiles, TinyImagenetDefaultsAreThePipeOptimSetting) {
  SKIP_WITHOUT_JPEG();
  testing::TempDir dir;
  write_tiny_imagenet(dir.file("tiny-imagenet-200"));
  const auto splits = testing::load_dataset("{type: tiny_imagenet}", dir.path());
  EXPECT_EQ(splits.spec.input_shape, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_TRUE(contains(splits.description, "random resized crop 224, resize 256, centre crop 224, flip, normalised"));
  const Batch b = splits.train->get({0, 3}, 9);
  EXPECT_EQ(b.x.sizes(), (std::vector<int64_t>{2, 3, 224, 224}));
  // Example 3 is n02_1, flat red 240; ImageNet normalisation: (240/255 - 0.485) / 0.229.
  EXPECT_NEAR(b.x[1][0][100][100].item<float>(), (240.0f / 255 - 0.485f) / 0.229f, 0.1);
}

TEST(ImageFiles, TinyImagenetErrors) {
  SKIP_WITHOUT_JPEG();
  testing::TempDir dir;
  const std::string root = dir.file("tiny-imagenet-200");
  EXPECT_TRUE(contains(testing::load_error("{type: tiny_imagenet}", dir.path()), "tiny-imagenet-200.zip"));
  write_tiny_imagenet(root);
  testing::write_file(root + "/val/val_annotations.txt", "val_0.JPEG\tn09\t0\t0\t1\t1\n");
  EXPECT_TRUE(contains(testing::load_error("{type: tiny_imagenet}", dir.path()),
                       "val_annotations.txt:1: class n09 has no folder in train/"));
  testing::write_file(root + "/val/val_annotations.txt", "val_7.JPEG\tn01\t0\t0\t1\t1\n");
  EXPECT_TRUE(contains(testing::load_error("{type: tiny_imagenet}", dir.path()), "val_7.JPEG not found"));
  testing::write_file(root + "/val/val_annotations.txt", "val_0.JPEG\tn01\t0\t0\t1\t1\n");
  // A damaged image is found when its batch is built, and named.
  testing::write_file(root + "/train/n01/images/n01_1.JPEG", "not a jpeg");
  const auto splits = testing::load_dataset("{type: tiny_imagenet}", dir.path());
  EXPECT_TRUE(contains(testing::user_error([&] { splits.train->get({1}, 0); }), "n01_1.JPEG: not a readable JPEG"));
  testing::write_file(root + "/train/n01/images/n01_1.JPEG", encode_jpeg(flat(1, 2, 3, 32)));
  const auto native =
      testing::load_dataset("{type: tiny_imagenet, random_resized_crop: 0, resize: 0, center_crop: 0}", dir.path());
  EXPECT_TRUE(contains(testing::user_error([&] { native.train->get({1}, 0); }), "a 32x32 image where Tiny-ImageNet"));
}

TEST(ImageFiles, ImageFolderAndFood101Layouts) {
  SKIP_WITHOUT_JPEG();
  testing::TempDir dir;
  const auto put = [&](const std::string& path, const at::Tensor& image) {
    testing::write_file(dir.file(path), encode_jpeg(image, 100));
  };
  const std::string native = "random_resized_crop: 0, resize: 0, center_crop: 0, normalize: false";
  // torchvision's ImageFolder: classes are the sorted training folders; .jpg and .JPEG both count.
  put("folder/train/pizza/a.jpg", flat(250, 0, 0, 16));
  put("folder/train/pizza/b.JPEG", flat(240, 0, 0, 16));
  put("folder/train/bread/a.jpeg", flat(0, 0, 250, 16));
  testing::write_file(dir.file("folder/train/bread/notes.txt"), "not an image");
  put("folder/val/pizza/c.jpg", flat(200, 0, 0, 16));
  auto splits = testing::load_dataset("{type: image_folder, path: " + dir.file("folder") + ", " + native + "}", "");
  EXPECT_EQ(splits.spec.classes, 2);
  EXPECT_EQ(splits.spec.input_shape, (std::vector<int64_t>{3, 16, 16}));
  EXPECT_TRUE(at::equal(testing::whole(*splits.train).y, at::tensor({0, 1, 1}, at::kLong)));  // bread first
  EXPECT_TRUE(at::equal(testing::whole(*splits.test).y, at::tensor({1}, at::kLong)));
  // A .jpg that is a dangling link is named, not passed over (the split would shrink silently).
  std::filesystem::create_symlink(dir.file("gone.jpg"), dir.file("folder/train/pizza/c.jpg"));
  EXPECT_TRUE(contains(testing::load_error("{type: image_folder, path: " + dir.file("folder") + "}", ""),
                       "c.jpg: a symbolic link to a file that does not exist"));
  std::filesystem::remove(dir.file("folder/train/pizza/c.jpg"));
  put("folder/val/cake/d.jpg", flat(0, 250, 0, 16));
  EXPECT_TRUE(contains(testing::load_error("{type: image_folder, path: " + dir.file("folder") + "}", ""),
                       "cake is a class the training split does not have"));
  // Food-101: meta/classes.txt numbers the classes, meta/{train,test}.txt list <class>/<id>.
  put("food/images/apple_pie/1.jpg", flat(0, 0, 250, 8));
  put("food/images/apple_pie/2.jpg", flat(0, 0, 240, 8));
  put("food/images/waffles/3.jpg", flat(250, 0, 0, 8));
  testing::write_file(dir.file("food/meta/classes.txt"), "apple_pie\nwaffles\n");
  testing::write_file(dir.file("food/meta/train.txt"), "waffles/3\napple_pie/1\n");
  testing::write_file(dir.file("food/meta/test.txt"), "apple_pie/2\r\n");
  splits = testing::load_dataset("{type: image_folder, path: " + dir.file("food") + ", " + native + "}", "");
  EXPECT_EQ(splits.spec.classes, 2);
  EXPECT_TRUE(at::equal(testing::whole(*splits.train).y, at::tensor({1, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(testing::whole(*splits.test).y, at::tensor({0}, at::kLong)));
  testing::write_file(dir.file("food/meta/test.txt"), "apple_pie/9\n");
  EXPECT_TRUE(contains(testing::load_error("{type: image_folder, path: " + dir.file("food") + "}", ""),
                       "test.txt:1: image"));
  testing::write_file(dir.file("food/meta/test.txt"), "sushi/1\n");
  EXPECT_TRUE(contains(testing::load_error("{type: image_folder, path: " + dir.file("food") + "}", ""),
                       "is not <class>/<id> with a class of meta/classes.txt"));
}

}  // namespace
}  // namespace pipelab::image_files_test
