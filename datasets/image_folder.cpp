/// `image_folder`: JPEG images in one of the two folder layouts researchers keep them in.
///
/// - torchvision's ImageFolder (`layout: image_folder`): <path>/<train>/<class>/*.jpg and
///   <path>/<test>/<class>/*.jpg. Classes are the training split's folder names, sorted,
///   numbered 0, 1, ... as ImageFolder numbers them; a test folder must be one of them.
/// - Food-101 (`layout: food101`, the archive's own: images/<class>/<id>.jpg with
///   meta/classes.txt and meta/{train,test}.txt listing "<class>/<id>"; gpipe_test's image
///   rows train on it). Classes in classes.txt's order (alphabetical, as ImageFolder's).
///
/// `layout: auto` (default) picks food101 when meta/train.txt exists. JPEGs are decoded
/// (libjpeg-turbo) when a batch needs them; the transform defaults are ImageNet's (random
/// resized crop 224 and flip for training, resize 256 and centre crop 224 for testing).
#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/io/input_file.h"
#include "core/util/error.h"
#include "datasets/image_dataset.h"
#include "datasets/io/files.h"
#include "datasets/io/jpeg.h"

namespace fs = std::filesystem;

namespace pipelab {
namespace {

enum class Layout { Auto, ImageFolder, Food101 };

struct ImageFolderOptions {
  std::string path;
  Layout layout = Layout::Auto;
  std::string train = "train", test = "val";
  ImageTransformOptions transform = imagenet_transform();
  template <class V>
  void fields(V& v) {
    v.required("path", path, "the dataset's folder", non_empty);
    v.choice("layout", layout,
             Choices<Layout>{{"auto", Layout::Auto}, {"image_folder", Layout::ImageFolder}, {"food101", Layout::Food101}},
             "image_folder: <train>/<class>/*.jpg and <test>/<class>/*.jpg; food101: images/ with meta/; auto: food101 "
             "when meta/train.txt exists");
    v("train", train, "image_folder: the training split's folder", non_empty);
    v("test", test, "image_folder: the test split's folder", non_empty);
    transform.fields(v);
  }
};

bool is_jpeg(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg";
}

/// The JPEGs of one class folder, sorted; a folder without any is an error (ImageFolder's too).
std::vector<std::string> class_images(const fs::path& folder) {
  std::vector<std::string> out, others;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::error_code ec;
    const bool regular = entry.is_regular_file(ec);
    // A .jpg that is not a readable file (a dangling link, a loop, a folder) is named, not
    // passed over: the split would silently train on fewer images than the folder shows.
    if (!regular && is_jpeg(entry.path())) check_input_file(entry.path().string());
    if (!regular) continue;
    (is_jpeg(entry.path()) ? out : others).push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) {
    throw UserError(fmt::format("image_folder: {} has no .jpg or .jpeg image{}. Fix: convert the images to JPEG (only "
                                "JPEG is decoded), or remove the folder",
                                folder.string(), others.empty() ? "" : fmt::format(" ({} other files)", others.size())));
  }
  return out;
}

std::vector<std::string> class_folders(const fs::path& root) {
  if (!fs::is_directory(root)) {
    throw UserError(fmt::format("image_folder: folder {} not found (expected {}/<class>/*.jpg). Fix: set the "
                                "dataset's path, train and test",
                                root.string(), root.string()));
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) throw UserError(fmt::format("image_folder: {} has no class folders", root.string()));
  return names;
}

ImageListing list_split(const fs::path& root, std::map<std::string, int64_t>& classes, bool defines_classes) {
  ImageListing out;
  for (const std::string& name : class_folders(root)) {
    if (defines_classes) classes.emplace(name, static_cast<int64_t>(classes.size()));
    const auto it = classes.find(name);
    if (it == classes.end()) {
      throw UserError(fmt::format("image_folder: {} is a class the training split does not have. Fix: give the "
                                  "training split a folder {}, or remove it here",
                                  (root / name).string(), name));
    }
    for (const std::string& f : class_images(root / name)) {
      out.paths.push_back(f);
      out.labels.push_back(it->second);
    }
  }
  return out;
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::istringstream in(read_file(file.string()));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

/// Food-101's split file: one "<class>/<id>" per line, the image images/<class>/<id>.jpg.
ImageListing list_food101(const fs::path& root, const std::string& split, const std::map<std::string, int64_t>& classes) {
  const fs::path file = root / "meta" / (split + ".txt");
  if (!fs::is_regular_file(file)) throw UserError(fmt::format("Food-101: {} not found", file.string()));
  ImageListing out;
  const std::vector<std::string> lines = lines_of(file);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t slash = lines[i].find('/');
    const auto it = slash == std::string::npos ? classes.end() : classes.find(lines[i].substr(0, slash));
    if (it == classes.end()) {
      throw UserError(fmt::format("{}:{}: '{}' is not <class>/<id> with a class of meta/classes.txt", file.string(),
                                  i + 1, lines[i]));
    }
    const fs::path image = root / "images" / (lines[i] + ".jpg");
    if (!fs::is_regular_file(image)) {
      throw UserError(fmt::format("{}:{}: image {} not found", file.string(), i + 1, image.string()));
    }
    out.paths.push_back(image.string());
    out.labels.push_back(it->second);
  }
  if (out.paths.empty()) throw UserError(fmt::format("{}: no images listed", file.string()));
  return out;
}

class ImageFolder : public Configured<DatasetFactory, ImageFolderOptions> {
 public:
  using Configured::Configured;

  DatasetSplits load(const DataContext& /*context*/) const override {
    const fs::path root(options_.path);
    if (!jpeg_supported()) decode_jpeg("", root.string());  // throws the "built without libjpeg" error
    const bool food = options_.layout == Layout::Food101 ||
                      (options_.layout == Layout::Auto && fs::is_regular_file(root / "meta" / "train.txt"));
    std::map<std::string, int64_t> classes;
    ImageListing train, test;
    if (food) {
      for (const std::string& name : lines_of(root / "meta" / "classes.txt")) {
        classes.emplace(name, static_cast<int64_t>(classes.size()));
      }
      train = list_food101(root, "train", classes);
      test = list_food101(root, "test", classes);
    } else {
      train = list_split(root / options_.train, classes, true);
      test = list_split(root / options_.test, classes, false);
    }
    // Without a resize every image must have the first one's size, or batches could not form.
    const at::Tensor first = decode_jpeg(read_file(train.paths.front()), train.paths.front());
    const std::vector<int64_t> shape(first.sizes().begin(), first.sizes().end());
    auto transform = std::make_shared<const ImageTransform>(options_.transform, shape, *this);
    const bool any_size = options_.transform.resize > 0 || options_.transform.random_resized_crop > 0;
    const auto decode = [any_size, shape](const std::string& path) {
      at::Tensor image = decode_jpeg(read_file(path), path);
      if (!any_size && !image.sizes().equals(shape)) {
        throw UserError(fmt::format("{}: a {}x{} image where the first is {}x{}. Fix: set the dataset's resize", path,
                                    image.size(1), image.size(2), shape[1], shape[2]));
      }
      return image;
    };
    DatasetSplits out;
    out.train =
        std::make_shared<ImageFileDataset>(train.paths, at::tensor(train.labels, at::kLong), transform, true, decode);
    out.test = std::make_shared<ImageFileDataset>(test.paths, at::tensor(test.labels, at::kLong), transform, false, decode);
    out.spec.input_shape = transform->output_shape();
    out.spec.classes = static_cast<int64_t>(classes.size());
    out.description = fmt::format("{} from {}: {} train / {} test, {} classes, {}", food ? "Food-101" : "image folder",
                                  root.string(), train.paths.size(), test.paths.size(), classes.size(),
                                  transform->describe());
    return out;
  }
};

}  // namespace

PIPELAB_REGISTER(DatasetFactory, ImageFolder, "image_folder",
                 "JPEG images in torchvision's ImageFolder layout or Food-101's (images/ + meta/)");

}  // namespace pipelab
