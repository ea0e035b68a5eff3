/// `cifar10` and `cifar100`: the binary versions from https://www.cs.toronto.edu/~kriz/cifar.html.
/// Every record is label byte(s) then 3,072 pixel bytes (1,024 red, 1,024 green, 1,024 blue,
/// rows top to bottom). CIFAR-10 has 1 label byte and five training files data_batch_1..5.bin
/// of 10,000 records plus test_batch.bin; CIFAR-100 has a coarse (20 superclasses) and a
/// fine (100 classes) label byte, in train.bin (50,000) and test.bin (10,000).
///
/// Defaults are SpecTrain's CIFAR-10 setting (docs/schemes.md, "SpecTrain: common settings"): random crop 32
/// with padding 4, horizontal flip, mean (0.4914, 0.4822, 0.4465), std (0.2023, 0.1994,
/// 0.2010). Interlocking backprop (docs/schemes.md, "Interlocking ResNet example") normalises with std (0.2460, 0.2411,
/// 0.2576): set `std` to that.
#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>

#include "core/util/error.h"
#include "core/util/names.h"
#include "datasets/image_dataset.h"
#include "datasets/io/files.h"

namespace pipelab {
namespace {

constexpr int64_t kPixels = 3 * 32 * 32;

struct Records {
  at::Tensor images;  ///< uint8 [N, 3, 32, 32]
  at::Tensor labels;  ///< int64 [N]
};

/// Reads one binary file of records with `label_bytes` label bytes, keeping label byte
/// `label_index` (which must be < classes).
Records read_records(const std::string& path, int label_bytes, int label_index, int64_t classes,
                     const std::string& dataset) {
  const std::string bytes = read_maybe_gzip(path);
  const size_t record = static_cast<size_t>(label_bytes + kPixels);
  if (bytes.empty() || bytes.size() % record != 0) {
    throw UserError(fmt::format(
        "{}: wrong size for a {} binary file: {} bytes is not a whole number of {}-byte "
        "records ({} label byte{} + 3072 pixel bytes){}; download the binary version again",
        path, dataset, bytes.size(), record, label_bytes, label_bytes == 1 ? "" : "s",
        bytes.size() > record ? fmt::format(", {} bytes short of the next whole record", record - bytes.size() % record)
                              : ""));
  }
  const int64_t n = static_cast<int64_t>(bytes.size() / record);
  Records out{at::empty({n, 3, 32, 32}, at::kByte), at::empty({n}, at::kLong)};
  uint8_t* images = out.images.data_ptr<uint8_t>();
  int64_t* labels = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const char* r = bytes.data() + static_cast<size_t>(i) * record;
    const int64_t label = static_cast<unsigned char>(r[label_index]);
    if (label >= classes) {
      throw UserError(
          fmt::format("{}: record {} has label {}, but {} has {} classes (0-{}); is it a file of "
                      "another CIFAR version?",
                      path, i, label, dataset, classes, classes - 1));
    }
    labels[i] = label;
    std::memcpy(images + i * kPixels, r + label_bytes, kPixels);
  }
  return out;
}

Records concat(const std::vector<Records>& parts) {
  std::vector<at::Tensor> images, labels;
  for (const Records& p : parts) {
    images.push_back(p.images);
    labels.push_back(p.labels);
  }
  return {at::cat(images), at::cat(labels)};
}

/// The two splits; `what` starts the description ("CIFAR-10 from <dir>").
DatasetSplits make_splits(const Records& train, const Records& test, const ImageTransformOptions& options,
                          const Component& owner, int64_t classes, const std::string& what) {
  auto transform = std::make_shared<const ImageTransform>(options, std::vector<int64_t>{3, 32, 32}, owner);
  DatasetSplits out;
  out.description =
      fmt::format("{}: {} train / {} test, {}", what, train.labels.size(0), test.labels.size(0), transform->describe());
  out.train = std::make_shared<ImageTensorDataset>(train.images, train.labels, transform, true);
  out.test = std::make_shared<ImageTensorDataset>(test.images, test.labels, transform, false);
  out.spec.input_shape = transform->output_shape();
  out.spec.classes = classes;
  return out;
}

const char* const kCifar10Url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";

/// SpecTrain's CIFAR-10 transforms (docs/schemes.md, "SpecTrain: common settings").
ImageTransformOptions cifar10_transform() {
  ImageTransformOptions t;
  t.crop_padding = 4;
  t.flip = true;
  t.mean = {0.4914, 0.4822, 0.4465};
  t.std = {0.2023, 0.1994, 0.2010};
  return t;
}

struct Cifar10Options {
  std::optional<std::string> path;
  std::optional<std::vector<int64_t>> train_batches;
  ImageTransformOptions transform = cifar10_transform();
  template <class V>
  void fields(V& v) {
    v("path", path,
      "folder with data_batch_*.bin and test_batch.bin (default: <data_dir>/cifar10/cifar-10-batches-bin)");
    v("train_batches", train_batches,
      "training files to read, e.g. [1, 2] (default: every data_batch_1..5.bin present)");
    transform.fields(v);
  }
};

class Cifar10 : public Configured<DatasetFactory, Cifar10Options> {
 public:
  using Configured::Configured;
  DatasetSplits load(const DataContext& context) const override {
    const DatasetHome home{"CIFAR-10",
                           {"cifar10/cifar-10-batches-bin", "cifar-10-batches-bin", "cifar10"},
                           fmt::format("download {} and extract it into the data folder (tar xzf)", kCifar10Url)};
    const std::string dir = locate_dataset(context, options_.path, home);
    std::vector<int64_t> wanted = options_.train_batches.value_or(std::vector<int64_t>{1, 2, 3, 4, 5});
    std::vector<std::string> names;
    std::vector<Records> parts;
    for (const int64_t b : wanted) {
      if (b < 1 || b > 5) fail("train_batches", fmt::format("there is no training batch {}", b), "use numbers 1 to 5");
      const std::string name = fmt::format("data_batch_{}.bin", b);
      const bool present = std::filesystem::is_regular_file(std::filesystem::path(dir) / name) ||
                           std::filesystem::is_regular_file(std::filesystem::path(dir) / (name + ".gz"));
      // Without an explicit list, whichever of the five files are present are read.
      if (!present && !options_.train_batches) continue;
      parts.push_back(read_records(require_file(dir, name, home), 1, 0, 10, "CIFAR-10"));
      names.push_back(name);
    }
    if (parts.empty()) {
      throw UserError(fmt::format("CIFAR-10: no training file data_batch_1.bin ... data_batch_5.bin in {}; {}", dir,
                                  home.how_to_get));
    }
    const Records train = concat(parts);
    const Records test = read_records(require_file(dir, "test_batch.bin", home), 1, 0, 10, "CIFAR-10");
    return make_splits(
        train, test, options_.transform, *this, 10,
        fmt::format("CIFAR-10 from {} ({} of 5 training files: {})", dir, parts.size(), join(names, ", ")));
  }
};

/// Per-channel statistics of the CIFAR-100 training images, as commonly used.
ImageTransformOptions cifar100_transform() {
  ImageTransformOptions t = cifar10_transform();
  t.mean = {0.5071, 0.4865, 0.4409};
  t.std = {0.2673, 0.2564, 0.2762};
  return t;
}

struct Cifar100Options {
  enum class Label { Fine, Coarse };
  std::optional<std::string> path;
  Label label = Label::Fine;
  ImageTransformOptions transform = cifar100_transform();
  template <class V>
  void fields(V& v) {
    v("path", path, "folder with train.bin and test.bin (default: <data_dir>/cifar100/cifar-100-binary)");
    v.choice("label", label, Choices<Label>{{"fine", Label::Fine}, {"coarse", Label::Coarse}},
             "fine: 100 classes; coarse: 20 superclasses");
    transform.fields(v);
  }
};

class Cifar100 : public Configured<DatasetFactory, Cifar100Options> {
 public:
  using Configured::Configured;
  DatasetSplits load(const DataContext& context) const override {
    const DatasetHome home{"CIFAR-100",
                           {"cifar100/cifar-100-binary", "cifar-100-binary", "cifar100"},
                           "download https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz and extract it into the "
                           "data folder (tar xzf)"};
    const std::string dir = locate_dataset(context, options_.path, home);
    const bool fine = options_.label == Cifar100Options::Label::Fine;
    const int64_t classes = fine ? 100 : 20;
    // Byte 0 is the coarse label, byte 1 the fine one.
    const Records train = read_records(require_file(dir, "train.bin", home), 2, fine ? 1 : 0, classes, "CIFAR-100");
    const Records test = read_records(require_file(dir, "test.bin", home), 2, fine ? 1 : 0, classes, "CIFAR-100");
    return make_splits(train, test, options_.transform, *this, classes,
                       fmt::format("CIFAR-100 ({} labels) from {}", fine ? "fine" : "coarse", dir));
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, Cifar10, "cifar10", "CIFAR-10 binary version (32x32 colour images, 10 classes)");
PIPELAB_REGISTER(DatasetFactory, Cifar100, "cifar100",
                 "CIFAR-100 binary version (32x32 colour images, 100 fine or 20 coarse classes)");

}  // namespace pipelab
