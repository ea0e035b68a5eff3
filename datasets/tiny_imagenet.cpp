/// `tiny_imagenet`: Tiny-ImageNet-200 (http://cs231n.stanford.edu/tiny-imagenet-200.zip) in
/// its own folder layout: train/<wnid>/images/*.JPEG (500 per class) and val/images/*.JPEG
/// with val/val_annotations.txt (file, wnid, box) as the test split; test/ has no labels.
/// Classes are the train folders' wnids in sorted order, as torchvision's ImageFolder
/// numbers them. JPEGs are decoded (libjpeg-turbo) when a batch needs them.
///
/// Defaults are PipeOptim's (docs/schemes.md, "PipeOptim scripts"): random resized crop 224 + flip for
/// training, resize 256 + centre crop 224 for testing, ImageNet normalisation. Its
/// Inception-v3 setting is `random_resized_crop: 299, flip: false, resize: 342,
/// center_crop: 299`; the native 64x64 images: `random_resized_crop: 0, resize: 0,
/// center_crop: 0, crop_padding: 8`.
#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/util/error.h"
#include "datasets/image_dataset.h"
#include "datasets/io/files.h"
#include "datasets/io/jpeg.h"

namespace fs = std::filesystem;

namespace pipelab {
namespace {

struct TinyImagenetOptions {
  std::optional<std::string> path;
  ImageTransformOptions transform = imagenet_transform();
  template <class V>
  void fields(V& v) {
    v("path", path, "the tiny-imagenet-200 folder (default: <data_dir>/tiny-imagenet-200)");
    transform.fields(v);
  }
};

class TinyImagenet : public Configured<DatasetFactory, TinyImagenetOptions> {
 public:
  using Configured::Configured;

  DatasetSplits load(const DataContext& context) const override {
    const DatasetHome home{"Tiny-ImageNet",
                           {"tiny-imagenet-200", "tiny_imagenet/tiny-imagenet-200", "tiny_imagenet"},
                           "download http://cs231n.stanford.edu/tiny-imagenet-200.zip and unzip it into the data "
                           "folder"};
    const std::string dir = locate_dataset(context, options_.path, home);
    if (!jpeg_supported()) decode_jpeg("", dir);  // throws the "built without libjpeg" error
    std::map<std::string, int64_t> classes;
    const ImageListing train = list_train(dir, home, classes);
    const ImageListing val = list_val(dir, home, classes);
    const std::vector<int64_t> shape{3, 64, 64};
    auto transform = std::make_shared<const ImageTransform>(options_.transform, shape, *this);
    // Every image is 64x64; without a resize a different one could not be batched.
    const bool any_size = options_.transform.resize > 0;
    const auto decode = [any_size](const std::string& path) {
      at::Tensor image = decode_jpeg(read_file(path), path);
      if (!any_size && (image.size(1) != 64 || image.size(2) != 64)) {
        throw UserError(
            fmt::format("{}: a {}x{} image where Tiny-ImageNet has 64x64 ones; replace the file or set "
                        "the dataset's `resize`",
                        path, image.size(1), image.size(2)));
      }
      return image;
    };
    DatasetSplits out;
    out.train =
        std::make_shared<ImageFileDataset>(train.paths, at::tensor(train.labels, at::kLong), transform, true, decode);
    out.test =
        std::make_shared<ImageFileDataset>(val.paths, at::tensor(val.labels, at::kLong), transform, false, decode);
    out.spec.input_shape = transform->output_shape();
    out.spec.classes = static_cast<int64_t>(classes.size());
    out.description = fmt::format("Tiny-ImageNet from {}: {} train / {} val, {} classes, {}", dir, train.paths.size(),
                                  val.paths.size(), classes.size(), transform->describe());
    return out;
  }

 private:
  static ImageListing list_train(const std::string& dir, const DatasetHome& home, std::map<std::string, int64_t>& classes) {
    const fs::path root = fs::path(dir) / "train";
    if (!fs::is_directory(root)) {
      throw UserError(fmt::format("Tiny-ImageNet: folder {} not found (expected train/<wnid>/images/*.JPEG); {}",
                                  root.string(), home.how_to_get));
    }
    std::vector<std::string> wnids;
    for (const auto& entry : fs::directory_iterator(root)) {
      if (entry.is_directory()) wnids.push_back(entry.path().filename().string());
    }
    std::sort(wnids.begin(), wnids.end());
    ImageListing out;
    for (const std::string& wnid : wnids) {
      const int64_t label = static_cast<int64_t>(classes.size());
      classes.emplace(wnid, label);
      const std::vector<std::string> files = list_files((root / wnid / "images").string(), ".JPEG");
      if (files.empty()) {
        throw UserError(fmt::format("Tiny-ImageNet: no .JPEG image in {}; the extraction looks incomplete: {}",
                                    (root / wnid / "images").string(), home.how_to_get));
      }
      for (const std::string& f : files) {
        out.paths.push_back(f);
        out.labels.push_back(label);
      }
    }
    if (classes.empty()) {
      throw UserError(fmt::format("Tiny-ImageNet: no class folder in {}; {}", root.string(), home.how_to_get));
    }
    return out;
  }

  static ImageListing list_val(const std::string& dir, const DatasetHome& home,
                          const std::map<std::string, int64_t>& classes) {
    const fs::path annotations = fs::path(dir) / "val" / "val_annotations.txt";
    if (!fs::is_regular_file(annotations)) {
      throw UserError(fmt::format("Tiny-ImageNet: {} not found (the labels of val/images); {}", annotations.string(),
                                  home.how_to_get));
    }
    std::istringstream lines(read_file(annotations.string()));
    std::string line;
    ImageListing out;
    for (int64_t line_no = 1; std::getline(lines, line); ++line_no) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      std::istringstream cells(line);
      std::string file, wnid;
      if (!std::getline(cells, file, '\t') || !std::getline(cells, wnid, '\t')) {
        throw UserError(
            fmt::format("{}:{}: expected <file>\\t<wnid>\\t<box>, got '{}'", annotations.string(), line_no, line));
      }
      const auto it = classes.find(wnid);
      if (it == classes.end()) {
        throw UserError(fmt::format("{}:{}: class {} has no folder in train/", annotations.string(), line_no, wnid));
      }
      const fs::path image = fs::path(dir) / "val" / "images" / file;
      if (!fs::is_regular_file(image)) {
        throw UserError(fmt::format("{}:{}: image {} not found", annotations.string(), line_no, image.string()));
      }
      out.paths.push_back(image.string());
      out.labels.push_back(it->second);
    }
    if (out.paths.empty()) throw UserError(fmt::format("{}: no annotation lines", annotations.string()));
    return out;
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, TinyImagenet, "tiny_imagenet",
                 "Tiny-ImageNet-200 (64x64 JPEGs, 200 classes) in its folder layout");

}  // namespace pipelab
