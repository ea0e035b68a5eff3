/// `mnist` and `fashion_mnist`: 28x28 grey images in LeCun's idx format, plain or .gz
/// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
/// t10k-labels-idx1-ubyte). The .gz files are read by their decompressed content, never
/// by the MD5 of the .gz: recompressed copies differ from the official downloads.
///
/// Defaults: no augmentation; normalisation with the training pixels' mean and standard
/// deviation (MNIST 0.1307 / 0.3081, as PyTorch's MNIST example; Fashion-MNIST 0.2860 /
/// 0.3530), both checked against the real files by tests/datasets/shared_data_test.cpp.
#include <ATen/ATen.h>

#include "core/util/error.h"
#include "datasets/image_dataset.h"
#include "datasets/io/files.h"
#include "datasets/io/idx.h"

namespace pipelab {
namespace {

/// One split's images [N, 1, H, W] and labels [N] from its two idx files.
std::pair<at::Tensor, at::Tensor> read_split(const std::string& dir, const std::string& prefix,
                                             const DatasetHome& home) {
  const std::string image_path = require_file(dir, prefix + "-images-idx3-ubyte", home);
  const std::string label_path = require_file(dir, prefix + "-labels-idx1-ubyte", home);
  const at::Tensor images = read_idx_ubyte(image_path, 3);
  const at::Tensor labels = read_idx_ubyte(label_path, 1);
  if (images.size(0) != labels.size(0)) {
    throw UserError(fmt::format("{} holds {} images but {} holds {} labels; the two files must be of the same split. "
                                "Fix: download both files of the split again.",
                                image_path, images.size(0), label_path, labels.size(0)));
  }
  if (labels.numel() && labels.max().item<int64_t>() > 9) {
    throw UserError(fmt::format("{}: label {} is not a class 0-9; is it a labels file of {}?", label_path,
                                labels.max().item<int64_t>(), home.dataset));
  }
  return {images.unsqueeze(1), labels.to(at::kLong)};
}

/// MNIST: where it lives and its pixel statistics.
struct Mnist {
  static constexpr const char* kPathDoc = "folder with the four idx files, plain or .gz (default: <data_dir>/mnist)";
  static constexpr double kMean = 0.1307, kStd = 0.3081;
  static DatasetHome home() {
    return {"MNIST",
            {"mnist", "MNIST/raw"},
            "download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
            "t10k-labels-idx1-ubyte.gz (https://yann.lecun.com/exdb/mnist/, or the mirror "
            "https://ossci-datasets.s3.amazonaws.com/mnist/) into <data_dir>/mnist"};
  }
};

/// Fashion-MNIST: the same files, elsewhere, with other statistics.
struct FashionMnist {
  static constexpr const char* kPathDoc =
      "folder with the four idx files, plain or .gz (default: <data_dir>/fashion-mnist)";
  static constexpr double kMean = 0.2860, kStd = 0.3530;
  static DatasetHome home() {
    return {"Fashion-MNIST",
            {"fashion-mnist", "fashion_mnist", "FashionMNIST/raw"},
            "download the four idx .gz files from https://github.com/zalandoresearch/fashion-mnist (data/fashion) "
            "into <data_dir>/fashion-mnist"};
  }
};

template <class Variant>
struct IdxOptions {
  std::optional<std::string> path;
  ImageTransformOptions transform = normalise_only();
  template <class V>
  void fields(V& v) {
    v("path", path, Variant::kPathDoc);
    transform.fields(v);
  }
  static ImageTransformOptions normalise_only() {
    ImageTransformOptions t;
    t.mean = {Variant::kMean};
    t.std = {Variant::kStd};
    return t;
  }
};

template <class Variant>
class IdxImages : public Configured<DatasetFactory, IdxOptions<Variant>> {
 public:
  using Configured<DatasetFactory, IdxOptions<Variant>>::Configured;
  DatasetSplits load(const DataContext& context) const override {
    const IdxOptions<Variant>& o = this->options_;
    const DatasetHome home = Variant::home();
    const std::string dir = locate_dataset(context, o.path, home);
    const auto [train_x, train_y] = read_split(dir, "train", home);
    const auto [test_x, test_y] = read_split(dir, "t10k", home);
    if (train_x.sizes().slice(1) != test_x.sizes().slice(1)) {
      throw UserError(fmt::format("{}: training images are {}x{} but test images {}x{}", dir, train_x.size(2),
                                  train_x.size(3), test_x.size(2), test_x.size(3)));
    }
    auto transform = std::make_shared<const ImageTransform>(o.transform, train_x.sizes().slice(1).vec(), *this);
    DatasetSplits out;
    out.train = std::make_shared<ImageTensorDataset>(train_x, train_y, transform, true);
    out.test = std::make_shared<ImageTensorDataset>(test_x, test_y, transform, false);
    out.spec.input_shape = transform->output_shape();
    out.spec.classes = 10;
    out.description = fmt::format("{} from {}: {} train / {} test, {}", home.dataset, dir, train_x.size(0),
                                  test_x.size(0), transform->describe());
    return out;
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, IdxImages<Mnist>, "mnist", "MNIST handwritten digits (idx files, plain or .gz)");
PIPELAB_REGISTER(DatasetFactory, IdxImages<FashionMnist>, "fashion_mnist",
                 "Fashion-MNIST clothing images (idx files, plain or .gz)");

}  // namespace pipelab
