// gzip, idx, CIFAR binary and MNIST files written in their real formats in a temp folder
// and read back, with every error path: wrong magic, truncated, wrong size, missing files.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "datasets/io/gzip.h"
#include "datasets/io/idx.h"
#include "tests/datasets/dataset_test_util.h"

namespace pipelab::formats_test {
namespace {

using testing::contains;

#define SKIP_WITHOUT_ZLIB() \
  if (!gzip_supported()) GTEST_SKIP() << "built without zlib"

TEST(DatasetFormats, GzipRoundTripAndErrors) {
  SKIP_WITHOUT_ZLIB();
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 7919) % 251);
  const std::string gz = gzip_compress(data);
  EXPECT_TRUE(looks_gzipped(gz));
  EXPECT_EQ(gunzip(gz, "a.gz"), data);
  // Two concatenated members decompress to both contents, as gunzip does.
  EXPECT_EQ(gunzip(gz + gzip_compress("tail"), "a.gz"), data + "tail");
  EXPECT_TRUE(contains(testing::user_error([&] { gunzip(gz.substr(0, gz.size() / 2), "a.gz"); }), "a.gz: truncated"));
  std::string corrupt = gz;
  corrupt[20] ^= 0x55;
  corrupt[21] ^= 0x55;
  EXPECT_TRUE(contains(testing::user_error([&] { gunzip(corrupt, "b.gz"); }), "b.gz: "));
  EXPECT_TRUE(contains(testing::user_error([&] { gunzip("plain", "c.gz"); }), "c.gz: not a gzip file"));
}

TEST(DatasetFormats, IdxRawAndGzip) {
  testing::TempDir dir;
  const at::Tensor images = at::arange(2 * 3 * 4, at::kByte).reshape({2, 3, 4});
  const std::string bytes = encode_idx_ubyte(images);
  // Hand-checked header: magic 0x00000803, then 2, 3, 4 as big-endian 32-bit numbers.
  EXPECT_EQ(bytes.substr(0, 16), std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x03\0\0\0\x04", 16));
  EXPECT_EQ(bytes.size(), 16u + 24u);
  testing::write_file(dir.file("raw"), bytes);
  EXPECT_TRUE(at::equal(read_idx_ubyte(dir.file("raw"), 3), images));
  if (gzip_supported()) {
    testing::write_file(dir.file("x.gz"), gzip_compress(bytes));
    EXPECT_TRUE(at::equal(read_idx_ubyte(dir.file("x.gz"), 3), images));
  }
  const auto error = [&](const std::string& data, int dims) {
    return testing::user_error([&] { parse_idx_ubyte(data, dims, "f.idx"); });
  };
  EXPECT_TRUE(contains(error(bytes, 1),
                       "f.idx: wrong magic number 0x00000803, expected an idx file of unsigned "
                       "bytes with 1 dimension (magic number 0x00000801)"));
  EXPECT_TRUE(contains(error(bytes.substr(0, 30), 3),
                       "f.idx: truncated: the header gives shape [2, 3, 4] (24 bytes of "
                       "data) but the file holds 14 bytes"));
  EXPECT_TRUE(contains(error(bytes + "xx", 3), "f.idx: wrong size"));
  EXPECT_TRUE(contains(error(bytes.substr(0, 10), 3), "f.idx: truncated: 10 bytes, shorter than the 16-byte header"));
  EXPECT_TRUE(contains(error("ab", 3), "f.idx: truncated: 2 bytes"));
}

/// One CIFAR record: label bytes, then 3072 pixel bytes where pixel k of record `id` is
/// (id * 31 + k) mod 256.
std::string cifar_record(const std::vector<uint8_t>& labels, int id) {
  std::string r(labels.begin(), labels.end());
  for (int k = 0; k < 3072; ++k) r.push_back(static_cast<char>((id * 31 + k) % 256));
  return r;
}

TEST(DatasetFormats, Cifar10ReadsPresentBatchesInOrder) {
  testing::TempDir dir;
  const std::string folder = dir.file("cifar10/cifar-10-batches-bin/");
  testing::write_file(folder + "data_batch_1.bin", cifar_record({3}, 0) + cifar_record({7}, 1));
  testing::write_file(folder + "data_batch_3.bin", cifar_record({9}, 2));
  testing::write_file(folder + "test_batch.bin", cifar_record({1}, 3));
  const auto splits = testing::load_dataset("{type: cifar10, augment: false, normalize: false}", dir.path());
  EXPECT_TRUE(contains(splits.description, "2 of 5 training files: data_batch_1.bin, data_batch_3.bin"));
  EXPECT_EQ(splits.spec.input_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(splits.spec.classes, 10);
  const Batch train = testing::whole(*splits.train);
  EXPECT_TRUE(at::equal(train.y, at::tensor({3, 7, 9}, at::kLong)));
  // Red plane first, row-major: pixel (c=1, y=0, x=2) is byte 1024 + 2 of the record.
  EXPECT_FLOAT_EQ(train.x[1][1][0][2].item<float>(), static_cast<float>((31 + 1026) % 256) / 255.0f);
  EXPECT_FLOAT_EQ(train.x[2][2][31][31].item<float>(), static_cast<float>((62 + 3071) % 256) / 255.0f);
  EXPECT_EQ(splits.test->size(), 1);

  // An explicit list must be there whole.
  EXPECT_TRUE(contains(testing::load_error("{type: cifar10, train_batches: [1, 2]}", dir.path()),
                       "file data_batch_2.bin (or data_batch_2.bin.gz) not found in"));
  EXPECT_EQ(testing::load_dataset("{type: cifar10, train_batches: [3]}", dir.path()).train->size(), 1);
  EXPECT_TRUE(
      contains(testing::load_error("{type: cifar10, train_batches: [6]}", dir.path()), "there is no training batch 6"));
}

TEST(DatasetFormats, Cifar10Errors) {
  testing::TempDir dir;
  const std::string folder = dir.file("cifar-10-batches-bin/");
  EXPECT_TRUE(
      contains(testing::load_error("{type: cifar10}", dir.path()), "CIFAR-10 not found: looked for the folder"));
  EXPECT_TRUE(contains(testing::load_error("{type: cifar10}", dir.path()), "cifar-10-binary.tar.gz"));
  testing::write_file(folder + "data_batch_1.bin", cifar_record({3}, 0));
  EXPECT_TRUE(contains(testing::load_error("{type: cifar10}", dir.path()),
                       "file test_batch.bin (or test_batch.bin.gz) "
                       "not found in"));
  testing::write_file(folder + "test_batch.bin", cifar_record({3}, 0).substr(0, 3000));
  EXPECT_TRUE(contains(testing::load_error("{type: cifar10}", dir.path()),
                       "test_batch.bin: wrong size for a CIFAR-10 binary file: 3000 bytes is not a whole number of "
                       "3073-byte records"));
  testing::write_file(folder + "test_batch.bin", cifar_record({12}, 0));
  EXPECT_TRUE(contains(testing::load_error("{type: cifar10}", dir.path()),
                       "test_batch.bin: record 0 has label 12, but CIFAR-10 has 10 classes"));
  std::remove((folder + "data_batch_1.bin").c_str());
  EXPECT_TRUE(contains(testing::load_error("{type: cifar10}", dir.path()), "no training file data_batch_1.bin"));
  EXPECT_TRUE(contains(testing::load_error(fmt::format("{{type: cifar10, path: {}}}", dir.file("nowhere")), dir.path()),
                       "nowhere' (dataset option `path`) does not exist"));
}

TEST(DatasetFormats, Cifar100FineAndCoarse) {
  testing::TempDir dir;
  const std::string folder = dir.file("cifar-100-binary/");
  testing::write_file(folder + "train.bin", cifar_record({4, 87}, 0) + cifar_record({19, 99}, 1));
  testing::write_file(folder + "test.bin", cifar_record({0, 5}, 2));
  const auto fine = testing::load_dataset("{type: cifar100}", dir.path());
  EXPECT_EQ(fine.spec.classes, 100);
  EXPECT_TRUE(at::equal(testing::whole(*fine.train).y, at::tensor({87, 99}, at::kLong)));
  const auto coarse = testing::load_dataset("{type: cifar100, label: coarse}", dir.path());
  EXPECT_EQ(coarse.spec.classes, 20);
  EXPECT_TRUE(at::equal(testing::whole(*coarse.train).y, at::tensor({4, 19}, at::kLong)));
  testing::write_file(folder + "test.bin", cifar_record({0}, 2) + cifar_record({0}, 2).substr(0, 100));
  EXPECT_TRUE(contains(testing::load_error("{type: cifar100}", dir.path()), "3074-byte records (2 label bytes"));
}

TEST(DatasetFormats, MnistRawAndGzip) {
  testing::TempDir dir;
  const at::Tensor train_x = at::arange(3 * 28 * 28, at::kInt).remainder(256).to(at::kByte).reshape({3, 28, 28});
  const at::Tensor test_x = at::full({2, 28, 28}, 255, at::kByte);
  const bool gz = gzip_supported();
  const auto put = [&](const std::string& name, const at::Tensor& t, bool compress) {
    const std::string bytes = encode_idx_ubyte(t);
    testing::write_file(dir.file("mnist/" + name + (compress ? ".gz" : "")), compress ? gzip_compress(bytes) : bytes);
  };
  put("train-images-idx3-ubyte", train_x, gz);
  put("train-labels-idx1-ubyte", at::tensor({5, 0, 4}, at::kByte), false);
  put("t10k-images-idx3-ubyte", test_x, false);
  put("t10k-labels-idx1-ubyte", at::tensor({7, 2}, at::kByte), gz);
  const auto splits = testing::load_dataset("{type: mnist}", dir.path());
  EXPECT_EQ(splits.spec.input_shape, (std::vector<int64_t>{1, 28, 28}));
  const Batch test = testing::whole(*splits.test);
  EXPECT_TRUE(at::equal(test.y, at::tensor({7, 2}, at::kLong)));
  EXPECT_FLOAT_EQ(test.x[1][0][5][5].item<float>(), (1.0f - 0.1307f) / 0.3081f);
  const Batch train = testing::whole(*splits.train);
  EXPECT_FLOAT_EQ(train.x[0][0][0][3].item<float>(), (3.0f / 255.0f - 0.1307f) / 0.3081f);
  EXPECT_TRUE(contains(testing::load_error("{type: mnist, mean: [0.1, 0.2], std: [1, 1]}", dir.path()),
                       "dataset.mean: has 2 values for images with 1 channel"));

  put("t10k-labels-idx1-ubyte", at::tensor({7, 2, 1}, at::kByte), gz);
  EXPECT_TRUE(contains(testing::load_error("{type: mnist}", dir.path()), "holds 2 images but"));
  put("t10k-labels-idx1-ubyte", at::tensor({7, 12}, at::kByte), gz);
  EXPECT_TRUE(contains(testing::load_error("{type: mnist}", dir.path()), "label 12 is not a class 0-9"));
  EXPECT_TRUE(contains(testing::load_error("{type: fashion_mnist}", dir.path()), "Fashion-MNIST not found"));
}

}  // namespace
}  // namespace pipelab::formats_test
